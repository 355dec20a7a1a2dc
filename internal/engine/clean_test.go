package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ctrperf/internal/kernel"
)

func TestCleanGeneratorCgroups(t *testing.T) {
	tests := []struct {
		desc    string
		dirs    []string          // directories under the cgroup root
		files   map[string]string // files under the cgroup root
		links   map[string]string // symlinks under the cgroup root: name -> target
		runID   string
		dry     bool
		want    []string // removed, relative to the root
		kept    []string // must still exist afterwards
		wantErr string
	}{
		{desc: "v1 leftover removed, a run's group and the parent kept",
			dirs: []string{"cpu/ctrperf/generator-123", "cpu/ctrperf/r1/app"},
			want: []string{"cpu/ctrperf/generator-123"}, kept: []string{"cpu/ctrperf", "cpu/ctrperf/r1/app"}},
		{desc: "v2 leftover removed",
			dirs: []string{"ctrperf/generator-9"}, files: map[string]string{"cgroup.controllers": "cpu memory"},
			want: []string{"ctrperf/generator-9"}},
		{desc: "removed whatever run is cleaned: a generator belongs to none",
			dirs: []string{"cpu/ctrperf/generator-123"}, runID: "r1",
			want: []string{"cpu/ctrperf/generator-123"}},
		{desc: "dry run lists and keeps",
			dirs: []string{"cpu/ctrperf/generator-123"}, dry: true,
			want: []string{"cpu/ctrperf/generator-123"}, kept: []string{"cpu/ctrperf/generator-123"}},
		{desc: "co-mounted hierarchy reached through its symlink is listed once",
			dirs:  []string{"cpu,cpuacct/ctrperf/generator-7"},
			links: map[string]string{"cpu": "cpu,cpuacct", "cpuacct": "cpu,cpuacct"},
			want:  []string{"cpu/ctrperf/generator-7"}}, // the path ProtectGenerator uses
		{desc: "a live generator is left alone and reported when everything is cleaned",
			dirs: []string{"cpu/ctrperf/generator-42"}, files: map[string]string{"cpu/ctrperf/generator-42/cgroup.procs": "42\n"},
			kept: []string{"cpu/ctrperf/generator-42"}, wantErr: "still holds processes [42]"},
		{desc: "a live generator is no leftover of another run",
			dirs: []string{"cpu/ctrperf/generator-42"}, files: map[string]string{"cpu/ctrperf/generator-42/cgroup.procs": "42\n"},
			runID: "r1", kept: []string{"cpu/ctrperf/generator-42"}},
		{desc: "names that only look alike are not touched",
			dirs: []string{"cpu/ctrperf/generator-x", "cpu/ctrperf/generator-1-app", "cpu/other/generator-1"},
			kept: []string{"cpu/ctrperf/generator-x", "cpu/ctrperf/generator-1-app", "cpu/other/generator-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for f, content := range tc.files {
				if err := os.WriteFile(filepath.Join(root, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for name, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := cleanGeneratorCgroups(kernel.NewFS(kernel.Roots{Cgroup: root}), tc.runID, tc.dry, nil)
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var want []string
			for _, d := range tc.want {
				want = append(want, "cgroup "+filepath.Join(root, d))
			}
			if !reflect.DeepEqual(removed, want) {
				t.Errorf("removed %q, want %q", removed, want)
			}
			for _, d := range tc.kept {
				if _, err := os.Stat(filepath.Join(root, d)); err != nil {
					t.Errorf("%s should be kept: %v", d, err)
				}
			}
			if !tc.dry {
				for _, d := range tc.want {
					if _, err := os.Stat(filepath.Join(root, d)); err == nil {
						t.Errorf("%s still exists", d)
					}
				}
			}
		})
	}
}
