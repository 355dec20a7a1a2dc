package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
)

// Shared pieces of the tool workloads (kv, fileio, bonnie, exec, ctxsw, oltp,
// cpu): a knob
// reader, the Debian base image, the "sleeper" service that a tool runs in
// through engine.Exec, and host tool checks.

// baseImage is the image every tool workload runs in: the Debian base with
// memcached, mariadb-server, fio, bonnie++, sysbench and stress-ng.
func baseImage() string { return image.Resolve(image.DebianBase.Name) }

// dataEnv carries a service's data directory, as its own processes see it,
// to commands run through engine.Exec (which are not templated): docker
// exec inherits the container's environment and the host engine passes the
// service's environment to Exec'd children.
const dataEnv = "CTRPERF_DATA"

// toolDataDir is the DataDir of tool services inside a container.
const toolDataDir = "/data"

// sleeperService is a service that only exists for tools run inside it with
// engine.Exec: it makes its data directory (the writable layer has none) and
// sleeps. Teardown kills it (docker rm -f; SIGKILL of the host group).
func sleeperService(name string, c Config) engine.Service {
	return engine.Service{
		Name:      name,
		Image:     baseImage(),
		Command:   []string{"/bin/sh", "-c", `mkdir -p "$` + dataEnv + `" && exec sleep infinity`},
		Env:       map[string]string{dataEnv: "{{data:" + name + "}}"},
		DataDir:   toolDataDir,
		Resources: c.Resources,
	}
}

// inData wraps an ExecFunc so that every command runs with the service's
// data directory as its working directory: fio and mariadbd then write
// where the data placement under test applies, on any runtime.
func inData(ex load.ExecFunc) load.ExecFunc {
	return func(ctx context.Context, argv []string) ([]byte, []byte, int, error) {
		w := append([]string{"/bin/sh", "-c", `cd "$` + dataEnv + `" && exec "$@"`, "ctrperf-in-data"}, argv...)
		return ex(ctx, w)
	}
}

// The tool workloads (cpu, fileio, exec) share one skeleton: no app knobs,
// no network endpoint, their load knobs decoded once into the tool's own
// struct, a sleeper service that the tool runs inside, and the tools the
// host runtime must have. Each adds only its knobs and its drive.

// decodeTool is Decode for a tool workload whose knobs all sit under load:.
func decodeTool[L any](name string, k Knobs, parse func(map[string]any) (L, error), why string) (any, any, error) {
	var errs []error
	if len(k.App) > 0 {
		errs = append(errs, fmt.Errorf("%s has no app knobs (got %v); %s", name, slices.Sorted(maps.Keys(k.App)), why))
	}
	l, err := parse(k.Load)
	errs = append(errs, err, noNetwork(name, k.Network))
	return nil, l, errors.Join(errs...)
}

// toolServices is Services for a tool workload: one sleeper service named
// service, once the host runtime is known to have the tools.
func toolServices(name, service string, c Config, tools ...string) ([]engine.Service, error) {
	if err := hostTools(name, c, tools...); err != nil {
		return nil, err
	}
	return []engine.Service{sleeperService(service, c)}, nil
}

// noNetwork refuses network modes other than host for workloads that have no
// endpoint: a published port or container IP has nothing to measure there,
// and the engine would refuse a front service without ports anyway.
func noNetwork(name string, network engine.NetworkMode) error {
	switch network {
	case "", engine.NetworkHost:
	case plan.NetworkPodIP, plan.NetworkHostNetwork:
		// runtime kubernetes: a pod has its own network (the default) or
		// its node's; neither is measured.
	default:
		return fmt.Errorf("%s has no network endpoint: network %q has nothing to measure; use network: host (pod-ip, the default, or host-network on kubernetes)", name, network)
	}
	return nil
}

// lookPath is exec.LookPath, replaceable in tests.
var lookPath = exec.LookPath

// hostTools checks that the host runtime has the tools a workload runs, so
// a missing package is a not_run with its name rather than a failed run.
// A guest's tools are its disk's, not this machine's: not looked for here.
func hostTools(workload string, c Config, tools ...string) error {
	if !c.Runtime.Traits().ProcessesHere() {
		return nil
	}
	var missing []string
	for _, t := range tools {
		if _, err := c.lookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return &MissingToolsError{Workload: workload, Tools: missing}
	}
	return nil
}

// MissingToolsError is a host runtime's lack of the programs a workload
// runs there; `ctrperf doctor` names the Debian packages that provide them.
type MissingToolsError struct {
	Workload string
	Tools    []string // commands not found in PATH
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("%s on the host runtime needs %s, not found in PATH (install the Debian package of the same name)", e.Workload, strings.Join(e.Tools, ", "))
}

// parseSize parses "4096", "4k", "64M", "1G" (powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty size")
	}
	mult := int64(1)
	switch t[len(t)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	}
	if mult != 1 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional K, M or G suffix", s)
	}
	return n * mult, nil
}

// fmtSize writes a size the way fio and mariadbd read it.
func fmtSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "G"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// startedAfter calls started once the warm-up has passed, for drivers whose
// tool runs warm-up and measured window in one process (fio's ramp_time).
// The returned stop cancels it when the tool ends early.
func startedAfter(warmup time.Duration, started func()) (stop func()) {
	if started == nil {
		return func() {}
	}
	t := time.AfterFunc(warmup, started)
	return func() { t.Stop() }
}
