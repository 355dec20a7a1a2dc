// Package doctor reports what this machine can do for ctrperf: kernel,
// cgroups, CPU topology, IRQ handling, the Docker engine, which storage
// drivers and loop filesystems a private engine can use, which tools are
// installed, and warnings with concrete advice.
//
// Facts are gathered by independent collectors through injectable roots
// (proc, sys, dev) and a small Docker interface, so a failing collector is
// recorded in Facts.Errors and the rest still report; tests run on fixture
// trees in testdata/. The bench runner writes Facts as OUT/env.json.
package doctor

import (
	"context"
	"os/exec"
	"time"

	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
	"ctrperf/internal/vm"
)

// Facts is everything doctor found. It is JSON-serialisable and stable:
// the bench runner stores it next to results.
type Facts struct {
	Time    time.Time `json:"time"`
	Kernel  string    `json:"kernel"`
	Cgroups Cgroups   `json:"cgroups"`
	CPU     CPU       `json:"cpu"`
	// Irqbalance: the daemon is running (it rewrites IRQ affinity).
	Irqbalance      bool                   `json:"irqbalance"`
	Docker          Docker                 `json:"docker"`
	StorageDrivers  []daemon.DriverSupport `json:"storage_drivers"`
	LoopFilesystems []Capability           `json:"loop_filesystems"`
	LoopDevices     Capability             `json:"loop_devices"`
	// MountOptions are the data filesystem options probed by mounting
	// ("xfs nobarrier"), when asked (WithMountProbe).
	MountOptions []Capability `json:"mount_options,omitempty"`
	// VM says whether a VM runtime could run here (seed 003's KVM row).
	VM Capability `json:"vm_runtime"`
	// Podman says whether runtime podman can run here (podman.go).
	Podman Capability `json:"podman_runtime"`
	// VMGuest is what runtime vm finds: KVM's kind, QEMU, the guest
	// kernel, whether it boots under KVM, and emulation (vm.go).
	VMGuest VMFacts `json:"vm"`
	// Privileged says whether the engine can start --privileged containers.
	Privileged Capability `json:"privileged"`
	Tools      []Tool     `json:"tools"`
	// Kubernetes are the clusters runtime kubernetes can reach (kube.go).
	Kubernetes []results.KubeCluster `json:"kubernetes,omitempty"`
	Warnings   []string              `json:"warnings,omitempty"`
	// Errors are collectors that failed; their part of Facts is empty.
	Errors []string `json:"errors,omitempty"`
}

// Cgroups describes the cgroup hierarchy.
type Cgroups struct {
	Version       string   `json:"version"`                  // v1, v2 or hybrid
	Controllers   []string `json:"controllers"`              // enabled controllers
	V2Mount       string   `json:"v2_mount,omitempty"`       // where cgroup2 is mounted, if anywhere
	V2Controllers []string `json:"v2_controllers,omitempty"` // controllers the v2 mount has
}

// CPU is the processor topology.
type CPU struct {
	Online         string `json:"online"` // e.g. "0-1"
	Count          int    `json:"count"`
	NUMANodes      int    `json:"numa_nodes"`
	ThreadsPerCore int    `json:"threads_per_core"`
	SMT            string `json:"smt"`      // on, off, notsupported, "" unknown
	Governor       string `json:"governor"` // "" when there is no cpufreq
}

// Docker is the engine ctrperf would use by default.
type Docker struct {
	Answers       bool   `json:"answers"`
	Host          string `json:"host"`
	Version       string `json:"version,omitempty"`
	StorageDriver string `json:"storage_driver,omitempty"`
	DataRoot      string `json:"data_root,omitempty"`
	BackingFS     string `json:"backing_fs,omitempty"`
	CgroupDriver  string `json:"cgroup_driver,omitempty"`
	UserlandProxy *bool  `json:"userland_proxy,omitempty"` // nil: dockerd not a local process
	IPTables      *bool  `json:"iptables,omitempty"`
	Dockerd       string `json:"dockerd,omitempty"` // binary ctrperf would start
	DockerdPID    int    `json:"dockerd_pid,omitempty"`
	// MissingCaps are the capabilities dockerd's bounding set lacks
	// (empty: none; nil: not known, dockerd is no local process).
	MissingCaps []string `json:"dockerd_missing_capabilities,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// Capability is something usable or not, with the reason when not.
type Capability struct {
	Name   string `json:"name"`
	Usable bool   `json:"usable"`
	Reason string `json:"reason,omitempty"`
}

// Tool is an external program ctrperf wraps or uses.
type Tool struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Package string `json:"package"` // Debian package that provides it
	For     string `json:"for"`     // what needs it
}

// DockerProber finds the user's engine without starting one.
type DockerProber interface {
	Probe(ctx context.Context) (Docker, error)
}

type options struct {
	kernel          kernel.FS
	devRoot, libDir string
	usrRoot         string // /usr: where podman's netavark is looked for
	lookPath        func(string) (string, error)
	docker          DockerProber
	now             func() time.Time
	probeMounts     bool
	probe           func(ctx context.Context, fs string, options []string) (map[string]error, error)
	geteuid         func() int
	kvmProbe        func(path string, timeout time.Duration) (kernel.KVMProbe, error)
	// bootDir and modulesDir are where the guest kernel is looked for
	// (/boot, /lib/modules); bootProbe boots it under KVM.
	bootDir, modulesDir string
	bootProbe           func(ctx context.Context, o options, qemu string, k vm.Kernel, module string) vm.BootProbe
	kube                func(ctx context.Context) ([]results.KubeCluster, []error)
}

// WithMountProbe mounts a small loop filesystem of each type with seed
// 004's options, to report which this kernel takes (needs root).
func WithMountProbe() Option { return func(o *options) { o.probeMounts = true } }

// Option changes where and how facts are gathered.
type Option func(*options)

// WithKernel reads /proc, /sys and the cgroup mount through fs.
func WithKernel(fs kernel.FS) Option { return func(o *options) { o.kernel = fs } }

// WithDevRoot looks at /dev in dir.
func WithDevRoot(dir string) Option { return func(o *options) { o.devRoot = dir } }

// WithLookPath replaces exec.LookPath.
func WithLookPath(f func(string) (string, error)) Option { return func(o *options) { o.lookPath = f } }

// WithDocker replaces the Docker prober.
func WithDocker(p DockerProber) Option { return func(o *options) { o.docker = p } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

func defaultOptions() options {
	return options{kernel: kernel.DefaultFS(), devRoot: "/dev", libDir: "/var/lib/ctrperf", usrRoot: "/usr",
		lookPath: exec.LookPath, now: time.Now, probe: defaultProbe, geteuid: defaultGeteuid,
		kvmProbe: kernel.ProbeKVM, bootDir: "/boot", modulesDir: "/lib/modules", bootProbe: defaultBootProbe}
}

// Gather collects every fact; it fails only if ctx is done. A collector that
// fails leaves its part empty and adds to Facts.Errors.
func Gather(ctx context.Context, opts ...Option) (*Facts, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if o.docker == nil {
		o.docker = engineProber{kernel: o.kernel}
	}
	f := &Facts{Time: o.now().UTC()}
	for _, c := range collectors {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.collect(ctx, o, f); err != nil {
			f.Errors = append(f.Errors, c.name+": "+err.Error())
		}
	}
	f.Docker.Dockerd, _ = o.lookPath("dockerd")
	f.Warnings = Warnings(f)
	return f, nil
}

type collector struct {
	name    string
	collect func(context.Context, options, *Facts) error
}

var collectors = []collector{
	{"kernel", collectKernel},
	{"cgroups", collectCgroups},
	{"cpu", collectCPU},
	{"irqbalance", collectIrqbalance},
	{"docker", collectDocker},
	{"storage", collectStorage},
	{"tools", collectTools},
	{"mount options", collectMountOptions},
	{"vm", collectVM},
	{"podman", collectPodman},
	{"kubernetes", collectKube},
}
