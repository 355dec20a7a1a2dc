package doctor

import (
	"context"

	"ctrperf/internal/engine/daemon"
)

// collectStorage asks the daemon package the same question Start asks before
// starting a private engine, so doctor and a failing plan always agree.
func collectStorage(_ context.Context, o options, f *Facts) error {
	h, err := daemon.ReadHostFacts(daemon.WithKernel(o.kernel),
		daemon.WithDevRoot(o.devRoot), daemon.WithLibDir(o.libDir), daemon.WithLookPath(o.lookPath))
	if err != nil {
		return err
	}
	f.StorageDrivers = h.Drivers()
	for _, fs := range daemon.LoopFilesystems {
		c := Capability{Name: fs, Usable: true}
		if err := h.LoopFSSupport(fs); err != nil {
			c.Usable, c.Reason = false, err.Error()
		}
		f.LoopFilesystems = append(f.LoopFilesystems, c)
	}
	f.LoopDevices = Capability{Name: "loop", Usable: h.LoopControl}
	if !h.LoopControl {
		f.LoopDevices.Reason = "no /dev/loop-control: the kernel has no loop device support (modprobe loop)"
	}
	return nil
}
