package doctor

import (
	"context"

	"ctrperf/internal/deps"
)

// wantedTools are the programs ctrperf wraps or starts, one per Debian
// package of the one list (internal/deps): the package's first command.
func wantedTools() []Tool {
	var out []Tool
	for _, p := range deps.All() {
		if len(p.Commands) > 0 {
			out = append(out, Tool{Name: p.Commands[0], Package: p.Name, For: p.Why})
		}
	}
	return out
}

func collectTools(_ context.Context, o options, f *Facts) error {
	for _, t := range wantedTools() {
		t.Path, _ = o.lookPath(t.Name)
		f.Tools = append(f.Tools, t)
	}
	return nil
}
