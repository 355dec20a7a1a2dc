package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"

	"ctrperf/internal/plan"
)

var (
	// Docker accepts [a-zA-Z0-9][a-zA-Z0-9_.-]* in names; run ids and service
	// names go into names, labels, paths and cgroups, so the same rule holds.
	nameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
)

func sortStrings(s []string) { sort.Strings(s) }

// ValidateSpec checks a DeploySpec for a runtime before anything is created,
// so bad input fails with one clear error and leaves nothing behind.
func ValidateSpec(rt Runtime, spec DeploySpec) error {
	if spec.RunID == "" {
		return fmt.Errorf("deploy: empty run id")
	}
	if !nameRe.MatchString(spec.RunID) || len(spec.RunID) > 64 {
		return fmt.Errorf("deploy: run id %q must match %s and be at most 64 characters", spec.RunID, nameRe)
	}
	switch spec.Network {
	case NetworkHost, NetworkPublished, NetworkPublishedExternal, NetworkContainerIP:
	case plan.NetworkPodIP, plan.NetworkService, plan.NetworkNodePort, plan.NetworkHostNetwork:
		if !rt.TakesNetwork(spec.Network) {
			return fmt.Errorf("deploy %s: network %q needs runtime kubernetes", spec.RunID, spec.Network)
		}
	case "":
		return fmt.Errorf("deploy %s: no network mode (want host, published, published-external or container-ip)", spec.RunID)
	default:
		return fmt.Errorf("deploy %s: unknown network mode %q (want host, published, published-external or container-ip)", spec.RunID, spec.Network)
	}
	if rt.Traits().Processes && spec.Network != NetworkHost {
		return fmt.Errorf("deploy %s: network %q needs containers; the host runtime only has network \"host\"", spec.RunID, spec.Network)
	}
	if !rt.TakesNetwork(spec.Network) {
		return fmt.Errorf("deploy %s: network %q is not one of runtime %s", spec.RunID, spec.Network, rt)
	}
	switch spec.Data {
	case DataLayer, DataVolume, DataBind, DataTmpfs:
	case plan.DataEmptyDir, plan.DataEmptyDirMemory, plan.DataHostPath, plan.DataLocalPV:
		if !rt.TakesData(spec.Data) {
			return fmt.Errorf("deploy %s: data %q needs runtime kubernetes", spec.RunID, spec.Data)
		}
	case "":
		return fmt.Errorf("deploy %s: no data placement (want layer, volume, bind or tmpfs)", spec.RunID)
	default:
		return fmt.Errorf("deploy %s: unknown data placement %q (want layer, volume, bind or tmpfs)", spec.RunID, spec.Data)
	}
	if rt.Traits().Cluster && !rt.TakesData(spec.Data) { // the others keep their own rules (the host engine takes any)
		return fmt.Errorf("deploy %s: data %q is not one of runtime %s", spec.RunID, spec.Data, rt)
	}
	if len(spec.Services) == 0 {
		return fmt.Errorf("deploy %s: no services", spec.RunID)
	}
	seen := map[string]bool{}
	for i, s := range spec.Services {
		if !nameRe.MatchString(s.Name) {
			return fmt.Errorf("deploy %s: service %d: name %q must match %s", spec.RunID, i, s.Name, nameRe)
		}
		if seen[s.Name] {
			return fmt.Errorf("deploy %s: service %q appears twice", spec.RunID, s.Name)
		}
		seen[s.Name] = true
		if rt.Traits().Images && s.Image == "" {
			return fmt.Errorf("deploy %s: service %q has no image", spec.RunID, s.Name)
		}
		if rt.Traits().Processes && len(s.HostCommand) == 0 && len(s.Command) == 0 {
			return fmt.Errorf("deploy %s: service %q has no command to run on the host", spec.RunID, s.Name)
		}
		for _, p := range s.Ports {
			if p <= 0 || p > 65535 {
				return fmt.Errorf("deploy %s: service %q: port %d out of range", spec.RunID, s.Name, p)
			}
		}
		if s.Ready != nil && s.Ready.Port != 0 && !hasPort(s, s.Ready.Port) {
			return fmt.Errorf("deploy %s: service %q: ready check on port %d which is not in Ports %v", spec.RunID, s.Name, s.Ready.Port, s.Ports)
		}
		if s.DataDir != "" && s.DataDir[0] != '/' && rt.Traits().Images {
			return fmt.Errorf("deploy %s: service %q: DataDir %q must be an absolute path inside the container", spec.RunID, s.Name, s.DataDir)
		}
		if s.Privileged && rt.Traits().Processes {
			return fmt.Errorf("deploy %s: service %q: privileged needs runtime docker (--privileged is a container option)", spec.RunID, s.Name)
		}
		if s.Resources.CPUs < 0 || s.Resources.CPUShares < 0 || s.Resources.MemoryBytes < 0 {
			return fmt.Errorf("deploy %s: service %q: negative resource limit %+v", spec.RunID, s.Name, s.Resources)
		}
	}
	return nil
}

func hasPort(s Service, p int) bool {
	for _, q := range s.Ports {
		if q == p {
			return true
		}
	}
	return false
}

// ObjectName is the name of a run's per-service Docker object (container,
// volume): ctrperf-<runid>-<service>.
func ObjectName(runID, service string) string { return NamePrefix + "-" + runID + "-" + service }

// NetworkName is the user-defined bridge network of a run.
func NetworkName(runID string) string { return NamePrefix + "-" + runID }

// shortID is a stable 7-hex-digit digest of a run id, for kernel names that
// are limited to 15 characters (interfaces) and must still be derivable from
// the run id alone by `ctrperf clean`.
func shortID(runID string) string {
	h := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(h[:])[:7]
}

// RunLabels are the labels of every Docker object of a run.
func RunLabels(runID string) map[string]string {
	return map[string]string{LabelManaged: "true", LabelRun: runID}
}
