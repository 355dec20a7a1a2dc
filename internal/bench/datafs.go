package bench

import (
	"context"
	"errors"
	"fmt"

	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// DataFS is a run's data filesystem once mounted: the directory the
// services' data goes under, what the record says about it, and how it is
// removed (safe to repeat).
type DataFS struct {
	Root   string
	Info   *results.DataFSInfo
	Remove func(ctx context.Context) error
}

// DataFSMounter makes and mounts the data filesystem of run runID. An error
// wrapping daemon.ErrDataFSUnsupported means the configuration cannot run
// on this machine (recorded not_run).
type DataFSMounter func(ctx context.Context, runID string, spec plan.FilesystemSpec) (*DataFS, error)

// LoopDataFS mounts a loop-backed filesystem with daemon.MountDataFS.
func LoopDataFS(opts ...daemon.Option) DataFSMounter {
	return func(ctx context.Context, runID string, spec plan.FilesystemSpec) (*DataFS, error) {
		f, err := daemon.MountDataFS(ctx, runID, spec.Type, spec.Options, spec.SizeOrDefault(), opts...)
		if err != nil {
			return nil, err
		}
		return &DataFS{
			Root: f.Mount,
			Info: &results.DataFSInfo{FS: f.FS, Options: f.Options, Size: f.Size, Device: f.Device, Mount: f.Mount, Applied: f.Applied},
			Remove: func(ctx context.Context) error {
				return daemon.RemoveDataFS(ctx, f, opts...)
			},
		}, nil
	}
}

// mountDataFS mounts the configuration's data filesystem, if it has one,
// before the deployment; release removes it after the services are gone.
func (rn *run) mountDataFS() error {
	spec := rn.cfg.Filesystem
	if !spec.On() {
		return nil
	}
	mount := rn.r.opt.DataFS
	if mount == nil {
		mount = LoopDataFS()
	}
	rn.r.opt.Progress.Phase("mounting data filesystem")
	f, err := mount(rn.rctx, rn.id, spec)
	if err != nil {
		if rn.interrupted() {
			return err
		}
		if errors.Is(err, daemon.ErrDataFSUnsupported) {
			return notRunnable(fmt.Sprintf("data filesystem %s unavailable: %v", spec.Key(), err))
		}
		return rn.explain("data filesystem", err)
	}
	rn.dataFS = f
	rn.rec.DataFS = f.Info
	return nil
}

// removeDataFS unmounts the run's data filesystem, if it has one.
func (rn *run) removeDataFS(ctx context.Context) error {
	if rn.dataFS == nil {
		return nil
	}
	return rn.dataFS.Remove(ctx)
}
