package doctor

import (
	"context"
	"os"

	"ctrperf/internal/engine/daemon"
)

// probedMountOptions are the options of seed 004's comparison, per
// filesystem: what plans/storage-fs.yaml (and the seed's own mount line)
// use, and xfs nobarrier, which the seed used and Linux 4.19 removed.
var probedMountOptions = []struct {
	fs      string
	options []string
}{
	{"ext4", []string{"noatime", "data=writeback", "discard", "barrier=0", "nobarrier"}},
	{"xfs", []string{"noatime", "discard", "logbufs=8", "nobarrier"}},
}

// collectMountOptions mounts a small loop filesystem of each type with each
// option (WithMountProbe): whether this kernel takes it. It needs root, and
// creates and removes a loop device and mount per filesystem, so it only
// runs when asked (ctrperf doctor asks; the environment facts of a bench run
// do not).
func collectMountOptions(ctx context.Context, o options, f *Facts) error {
	if !o.probeMounts {
		return nil
	}
	for _, p := range probedMountOptions {
		if o.geteuid() != 0 {
			for _, opt := range p.options {
				f.MountOptions = append(f.MountOptions, Capability{Name: p.fs + " " + opt, Reason: "not probed: mounting needs root"})
			}
			continue
		}
		res, err := o.probe(ctx, p.fs, p.options)
		for _, opt := range p.options {
			c := Capability{Name: p.fs + " " + opt}
			switch e, ok := res[opt]; {
			case !ok && err != nil:
				c.Reason = "not probed: " + err.Error()
			case !ok:
				c.Reason = "not probed"
			case e != nil:
				c.Reason = e.Error()
			default:
				c.Usable = true
			}
			f.MountOptions = append(f.MountOptions, c)
		}
	}
	return nil
}

func defaultProbe(ctx context.Context, fs string, options []string) (map[string]error, error) {
	return daemon.ProbeMountOptions(ctx, fs, options)
}

var defaultGeteuid = os.Geteuid
