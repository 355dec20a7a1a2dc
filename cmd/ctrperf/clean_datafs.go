package main

import (
	"context"
	"fmt"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
)

// cleanDataFS removes the data filesystems (the plan's filesystem knob:
// mount, loop device, image) of runs whose owner is gone; a live session's
// are kept. dry lists what would go.
func cleanDataFS(ctx context.Context, runID string, own *engine.Ownership, dry bool) ([]string, error) {
	fss, err := daemon.ListDataFS()
	keep := map[string]bool{}
	var would []string
	for _, f := range fss {
		if runID != "" && f.RunID != runID {
			continue
		}
		what := fmt.Sprintf("data filesystem %s (%s on %s, %s)", f.Name, f.FS, f.Device, f.Mount)
		keep[f.Name] = own.Keep(what, f.RunID)
		if dry && !keep[f.Name] {
			would = append(would, what)
		}
	}
	if dry {
		return would, err
	}
	removed, cerr := daemon.CleanDataFS(ctx, runID, func(f daemon.DataFS) bool { return keep[f.Name] })
	if err == nil {
		err = cerr
	} else if cerr != nil {
		err = fmt.Errorf("%w; %v", err, cerr)
	}
	return removed, err
}
