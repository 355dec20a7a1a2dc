package daemon

import "ctrperf/internal/kernel"

// fsOf is the filesystem type path lives on: the deepest mount containing it.
func fsOf(mounts []kernel.Mount, path string) string {
	best, fs := -1, ""
	for _, m := range mounts {
		if kernel.PathUnder(path, m.Point) && len(m.Point) > best {
			best, fs = len(m.Point), m.FSType
		}
	}
	return fs
}
