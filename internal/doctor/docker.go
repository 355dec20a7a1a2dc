package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"

	"github.com/moby/moby/client"
)

// engineProber asks the user's engine (DOCKER_HOST or the default socket)
// and never starts one.
type engineProber struct{ kernel kernel.FS }

var _ DockerProber = engineProber{}

func (p engineProber) Probe(ctx context.Context) (Docker, error) {
	d := Docker{Host: daemon.UserHost()}
	eng, err := daemon.Probe(ctx, 3*time.Second)
	if err != nil {
		d.Error = err.Error()
		return d, nil // no engine is a fact, not a failure
	}
	defer eng.Close(ctx)
	d.Answers = true
	res, err := eng.Client().Info(ctx, client.InfoOptions{})
	if err != nil {
		return d, err
	}
	in := res.Info
	d.Version, d.StorageDriver, d.DataRoot, d.CgroupDriver = in.ServerVersion, in.Driver, in.DockerRootDir, in.CgroupDriver
	for _, kv := range in.DriverStatus {
		if kv[0] == "Backing Filesystem" {
			d.BackingFS = kv[1]
		}
	}
	if fl, ok := daemon.FlagsOf(p.kernel, d.Host); ok {
		d.UserlandProxy, d.IPTables = &fl.UserlandProxy, &fl.IPTables
		d.DockerdPID = fl.PID
		bnd, err1 := kernel.BoundingSet(p.kernel.Proc(), fl.PID)
		last, err2 := kernel.LastCapability(p.kernel.Proc())
		if err1 == nil && err2 == nil {
			d.MissingCaps = kernel.MissingCapabilities(bnd, last)
			if d.MissingCaps == nil {
				d.MissingCaps = []string{}
			}
		}
	}
	return d, nil
}

// privileged says whether the engine can start a --privileged container:
// runc must grant it every capability, so dockerd's own bounding set must
// hold them all. Where it does not (dockerd in a sandbox without some),
// runc refuses with "unable to apply caps" and a plan's privileged: true
// is recorded not_run.
func privileged(d Docker) Capability {
	c := Capability{Name: "privileged"}
	switch {
	case !d.Answers:
		c.Reason = "no Docker engine answers (ctrperf would start its own, with ctrperf's capabilities)"
	case d.MissingCaps == nil:
		c.Reason = "unknown: the engine's dockerd is not a local process whose capabilities ctrperf can read"
	case len(d.MissingCaps) > 0:
		c.Reason = fmt.Sprintf("dockerd (pid %d) lacks %s in its capability bounding set, and --privileged must grant every capability: runc refuses it (\"unable to apply caps\"), so a plan's privileged: true is recorded not_run", d.DockerdPID, strings.Join(d.MissingCaps, ", "))
	default:
		c.Usable = true
	}
	return c
}

func collectDocker(ctx context.Context, o options, f *Facts) error {
	d, err := o.docker.Probe(ctx)
	f.Docker = d
	f.Privileged = privileged(d)
	return err
}
