package engine

import (
	"os"
	"path/filepath"
	"testing"

	"ctrperf/internal/kernel"
)

// A nested engine's group (ctrperf/ctrperf-nested-*, with its inner
// containers' groups below it) is removed once it holds no process, in
// every hierarchy; one with a process anywhere below is a live engine's.
func TestCleanNestedCgroups(t *testing.T) {
	tests := []struct {
		desc  string
		dirs  []string
		procs map[string]string // cgroup.procs content by dir
		dry   bool
		gone  []string
		kept  []string
	}{
		{desc: "an empty v1 tree goes, deepest first, in every hierarchy",
			dirs: []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1/outer", "cpu/ctrperf/ctrperf-nested-overlay2-r1/inner", "memory/ctrperf/ctrperf-nested-overlay2-r1/outer"},
			gone: []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1", "memory/ctrperf/ctrperf-nested-overlay2-r1"}, kept: []string{"cpu/ctrperf", "memory/ctrperf"}},
		{desc: "a process in an inner container keeps the whole engine's group",
			dirs:  []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1/outer", "memory/ctrperf/ctrperf-nested-overlay2-r1/inner"},
			procs: map[string]string{"memory/ctrperf/ctrperf-nested-overlay2-r1/inner": "42\n"},
			kept:  []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1/outer", "memory/ctrperf/ctrperf-nested-overlay2-r1/inner"}},
		{desc: "v2: the unified tree",
			dirs: []string{"ctrperf/ctrperf-nested-overlay2-r2/x"}, gone: []string{"ctrperf/ctrperf-nested-overlay2-r2"}},
		{desc: "a dry run removes nothing",
			dirs: []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1/outer"}, dry: true,
			kept: []string{"cpu/ctrperf/ctrperf-nested-overlay2-r1/outer"}},
		{desc: "other groups of ctrperf's are not a nested engine's",
			dirs: []string{"cpu/ctrperf/r1/app", "cpu/ctrperf/generator-7", "cpu/docker/abc"},
			kept: []string{"cpu/ctrperf/r1/app", "cpu/ctrperf/generator-7", "cpu/docker/abc"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for d, c := range tc.procs {
				if err := os.WriteFile(filepath.Join(root, d, "cgroup.procs"), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := cleanNestedCgroups(kernel.NewFS(kernel.Roots{Cgroup: root}), tc.dry)
			if err != nil {
				t.Fatal(err)
			}
			if tc.dry && len(removed) == 0 {
				t.Error("a dry run lists nothing")
			}
			for _, d := range tc.gone {
				if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
					t.Errorf("%s still there (%v); removed %q", d, err, removed)
				}
			}
			for _, d := range tc.kept {
				if _, err := os.Stat(filepath.Join(root, d)); err != nil {
					t.Errorf("%s removed: %v", d, err)
				}
			}
		})
	}
}
