package doctor

import (
	"context"
	"time"

	"ctrperf/internal/engine/daemon"

	"github.com/moby/moby/client"
)

// engineProber asks the user's engine (DOCKER_HOST or the default socket)
// and never starts one.
type engineProber struct{ procRoot string }

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
	if fl, ok := daemon.FlagsOf(p.procRoot, d.Host); ok {
		d.UserlandProxy, d.IPTables = &fl.UserlandProxy, &fl.IPTables
	}
	return d, nil
}

func collectDocker(ctx context.Context, o options, f *Facts) error {
	d, err := o.docker.Probe(ctx)
	f.Docker = d
	return err
}
