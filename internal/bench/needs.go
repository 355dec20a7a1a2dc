package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"ctrperf/internal/deps"

	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/vm"
	"ctrperf/internal/workload"
)

// PlanImages are the images a plan's configurations deploy, in the order
// they first appear: the services' images of every configuration whose
// runtime runs images, and the Debian base of a nested engine. A service
// built from the user's Dockerfile context is built when it is deployed and
// is not listed. `ctrperf images build --for PLAN` builds these and no
// others.
func PlanImages(p *plan.Plan) ([]string, error) {
	wl, err := workload.Get(p.Workload)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(ref string) {
		if ref != "" && !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	for i := range p.Configurations {
		c := &p.Configurations[i]
		if c.Engine.Nested {
			add(nestedBase)
		}
		// A guest with Docker runs the services' images (the Debian base
		// where a workload names none), shipped into its engine.
		guestDocker := c.Runtime.Traits().Guest && c.VM.Docker
		if !c.Runtime.Traits().Images && !guestDocker {
			continue
		}
		cfg := workload.ConfigFor(c)
		// Which images a configuration deploys does not depend on the
		// programs of this machine: every one is "found".
		cfg.LookPath = func(name string) (string, error) { return name, nil }
		services, err := wl.Services(cfg)
		if err != nil {
			return nil, fmt.Errorf("configuration %s: %w", c.Name, err)
		}
		for _, s := range services {
			switch {
			case s.Build != nil:
			case s.Image == "" && guestDocker:
				add(vm.ContainerImage)
			default:
				add(s.Image)
			}
		}
	}
	return out, nil
}

// Machine is what PlanLacks asks of the machine a plan would run on.
type Machine struct {
	// LookPath finds a command (exec.LookPath).
	LookPath func(string) (string, error)
	// Daemon are the facts private engines and data filesystems need.
	Daemon daemon.HostFacts
	// Images is each ctrperf image's state on the default engine, by recipe
	// name and by ref; nil when no engine answers (images unchecked).
	Images map[string]image.State
	// BaseCached: the Debian base's rootfs tarball is in the cache, so the
	// base is imported without debootstrap.
	BaseCached bool
	// Cluster: a Kubernetes cluster answers (doctor's facts).
	Cluster bool
	// VM is why runtime vm with accel kvm does not run here ("" when it
	// does); VMEmulated why accel tcg does not; VMVirtiofs why a guest's
	// disk: virtiofs does not (no virtiofsd).
	VM, VMEmulated, VMVirtiofs string
	// Exists says whether a file exists (a plan's ssh_config).
	Exists func(string) bool
}

// Lacks is what a plan still needs on a machine, and how to get it.
type Lacks struct {
	Plan string `json:"plan"`
	// Packages are the Debian packages to install (Install is the command).
	Packages []string `json:"packages,omitempty"`
	// Images are the images not built yet (or built from an older recipe):
	// bench builds them on first use, `ctrperf images build --for PLAN`
	// ahead of time.
	Images []string `json:"images,omitempty"`
	// Other are lacks no package gives, each with its remedy.
	Other []Lack `json:"other,omitempty"`
	// Unchecked says what could not be looked at here.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Lack is one thing a plan needs, and the command or step that provides it.
type Lack struct {
	What string `json:"what"`
	Fix  string `json:"fix,omitempty"`
}

// Ready says that nothing lacks (images that bench builds on first use aside).
func (l Lacks) Ready() bool { return len(l.Packages) == 0 && len(l.Other) == 0 }

// Install is the command that installs the missing packages ("" for none).
func (l Lacks) Install() string {
	if len(l.Packages) == 0 {
		return ""
	}
	return deps.InstallCommand(l.Packages...)
}

// BuildImages is the command that builds the plan's missing images.
func (l Lacks) BuildImages() string {
	if len(l.Images) == 0 {
		return ""
	}
	return "ctrperf images build --for " + l.Plan
}

// PlanLacks says what p needs that m does not have: the Debian packages of
// the commands its configurations run on the host runtime (the workloads'
// own checks), of the Docker engine, of private engines' data roots and data
// filesystems, and of the base image's debootstrap; the images not built
// yet; a cluster, the lab's SSH hosts, a VM runtime.
func PlanLacks(p *plan.Plan, m Machine) Lacks {
	out := Lacks{Plan: p.Name}
	addPkg := func(name string) {
		if !slices.Contains(out.Packages, name) {
			out.Packages = append(out.Packages, name)
		}
	}
	addCmd := func(cmd string) {
		if pk, ok := deps.Providing(cmd); ok {
			addPkg(pk.Name)
			return
		}
		out.addOther(Lack{What: cmd + " (not in PATH)", Fix: "install the Debian package that provides " + cmd})
	}
	has := func(cmd string) bool { _, err := m.LookPath(cmd); return err == nil }
	wl, err := workload.Get(p.Workload)
	if err != nil {
		out.addOther(Lack{What: err.Error()})
		return out
	}
	engineNeeded := false
	for i := range p.Configurations {
		c := &p.Configurations[i]
		rt := c.Runtime
		tr := rt.Traits()
		// A loop filesystem needs its mkfs (a package); anything else the
		// kernel lacks is said in daemon's words.
		loopFS := func(fs string) bool {
			if cmd := "mkfs." + fs; !has(cmd) {
				addCmd(cmd)
				return false
			}
			return true
		}
		if !c.Engine.IsDefault() {
			engineNeeded = true
			fs, loop := strings.CutPrefix(c.Engine.DataRoot, "loop-")
			if !loop || loopFS(fs) {
				if err := daemon.CheckSpec(c.Engine, m.Daemon); err != nil && !errors.Is(err, daemon.ErrNoDockerd) {
					out.addOther(Lack{What: fmt.Sprintf("configuration %s: engine %s: %v", c.Name, c.Engine.Key(), err)})
				}
			}
		}
		if c.Filesystem.On() && loopFS(c.Filesystem.Type) {
			if err := m.Daemon.LoopFSSupport(c.Filesystem.Type); err != nil {
				out.addOther(Lack{What: fmt.Sprintf("configuration %s: filesystem %s: %v", c.Name, c.Filesystem.Type, err)})
			}
		}
		if c.Hosts.Remote() {
			switch {
			case p.SSHConfig == "":
				out.addUnchecked("the SSH hosts " + c.Hosts.String() + " (ssh's own config)")
			case m.Exists != nil && !m.Exists(p.SSHConfig):
				out.addOther(Lack{What: "the SSH hosts " + c.Hosts.String() + ": no " + p.SSHConfig,
					Fix: "make lab-up (the lab's hosts, in ctrperf's source tree)"})
			}
		}
		if tr.Processes || tr.Images {
			// The workload's own checks: the programs of the host runtime,
			// and of a client that runs on this machine.
			cfg := workload.ConfigFor(c)
			cfg.LookPath = m.LookPath
			if _, err := wl.Services(cfg); err != nil {
				if progs := missingPrograms(err); len(progs) > 0 {
					for _, t := range progs {
						addCmd(t)
					}
				} else {
					out.addOther(Lack{What: fmt.Sprintf("configuration %s: %v", c.Name, err)})
				}
			}
		}
		switch {
		case tr.Guest:
			// The guest's disk is the Debian base's rootfs; with Docker
			// inside, its images come from this machine's engine.
			engineNeeded = engineNeeded || !m.BaseCached || c.VM.Docker
			why := m.VM
			if c.VM.Emulated() {
				why = m.VMEmulated
			}
			if why != "" {
				out.addOther(Lack{What: fmt.Sprintf("runtime %s with accel %s (configuration %s)", rt, c.VM.Defaulted().Accel, c.Name), Fix: "none here: " + why})
			}
			if c.VM.Defaulted().Disk == vm.DiskVirtiofs && m.VMVirtiofs != "" {
				out.addOther(Lack{What: fmt.Sprintf("runtime %s with disk virtiofs (configuration %s)", rt, c.Name), Fix: m.VMVirtiofs})
			}
		case tr.Processes:
		case !tr.Cluster:
			// A runtime with a program of its own (podman) runs the
			// images built on the default engine too.
			engineNeeded = true
			if tr.Program != "" && !has(tr.Program) {
				addCmd(tr.Program)
			}
		default: // a cluster: its runtime is registered by the program (kubernetes)
			engineNeeded = true // its images are built on the default engine, then loaded into the nodes
			switch {
			case registeredOpener(rt) == nil:
				out.addOther(Lack{What: fmt.Sprintf("runtime %s: this program was built without it", rt), Fix: "make build (links every runtime)"})
			case !m.Cluster:
				out.addOther(Lack{What: "a Kubernetes cluster (runtime " + string(rt) + ")",
					Fix: "make kube-up && make kube-images (the lab cluster, in ctrperf's source tree), or KUBECONFIG"})
			}
		}
	}
	if engineNeeded {
		for _, pk := range deps.InSet(deps.SetEngine) {
			if len(pk.Commands) > 0 && !has(pk.Commands[0]) {
				addPkg(pk.Name)
			}
		}
	}
	refs, err := PlanImages(p)
	if err != nil {
		out.addOther(Lack{What: "images: " + err.Error()})
	}
	debootstrap := false
	for _, ref := range refs {
		if m.Images == nil {
			continue
		}
		st, known := m.Images[ref]
		if known && (st == image.StateCurrent || st == image.StateExternal) {
			continue
		}
		out.Images = append(out.Images, ref)
		debootstrap = debootstrap || image.Default().Debootstraps(ref)
	}
	if m.Images == nil && len(refs) > 0 {
		out.addUnchecked("images (no Docker engine answers)")
	}
	if debootstrap && !m.BaseCached && !has("debootstrap") {
		addCmd("debootstrap")
	}
	return out
}

// missingPrograms are the programs a workload found missing on the host
// runtime or where its client runs, through joined errors; nil when err is
// about something else.
func missingPrograms(err error) []string {
	var mt *workload.MissingToolsError
	var tm *workload.ToolMissingError
	switch {
	case errors.As(err, &mt):
		return mt.Tools
	case errors.As(err, &tm):
		var out []string
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				out = append(out, missingPrograms(e)...)
			}
			return out
		}
		return []string{tm.Program}
	}
	return nil
}

func (l *Lacks) addOther(x Lack) {
	if !slices.Contains(l.Other, x) {
		l.Other = append(l.Other, x)
	}
}

func (l *Lacks) addUnchecked(s string) {
	if !slices.Contains(l.Unchecked, s) {
		l.Unchecked = append(l.Unchecked, s)
	}
}
