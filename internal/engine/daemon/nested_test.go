package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"ctrperf/internal/kernel"
)

// The outer container of a nested engine gets the host's capabilities
// less those that reach the kernel itself (issue 24 item 7).
func TestNestedCapabilities(t *testing.T) {
	tests := []struct {
		desc    string
		capBnd  string
		want    []string // must be granted
		wantNot []string // must not be
	}{
		{desc: "a full bounding set: module loading, raw I/O and reboot dropped", capBnd: "000001ffffffffff",
			want: []string{"SYS_ADMIN", "NET_ADMIN", "SYS_RESOURCE", "AUDIT_READ"}, wantNot: []string{"SYS_MODULE", "SYS_RAWIO", "SYS_BOOT"}},
		{desc: "a set without SYS_ADMIN stays without it", capBnd: "000001ffffdfffff",
			want: []string{"NET_ADMIN"}, wantNot: []string{"SYS_ADMIN", "SYS_MODULE", "SYS_RAWIO", "SYS_BOOT"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			proc := t.TempDir()
			self := filepath.Join(proc, strconv.Itoa(os.Getpid()))
			for p, content := range map[string]string{
				filepath.Join(self, "status"):                        "Name:\tctrperf\nCapBnd:\t" + tc.capBnd + "\n",
				filepath.Join(proc, "sys", "kernel", "cap_last_cap"): "40\n",
			} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			caps, err := nestedCapabilities(kernel.NewFS(kernel.Roots{Proc: proc}))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.want {
				if !slices.Contains(caps, c) {
					t.Errorf("lacks %s: %v", c, caps)
				}
			}
			for _, c := range tc.wantNot {
				if slices.Contains(caps, c) {
					t.Errorf("grants %s: %v", c, caps)
				}
			}
		})
	}
}

// The outer container and the inner containers share one group of the
// nested engine's own under ctrperf's, named so each driver takes it.
func TestNestedCgroupBind(t *testing.T) {
	tests := []struct {
		desc string
		fs   kernel.FS
		want string
	}{
		{"the real cgroup mount", kernel.DefaultFS(), "/sys/fs/cgroup:/sys/fs/cgroup:rw"},
		{"the Options' cgroup root, mounted where the inner engine looks", kernel.NewFS(kernel.Roots{Cgroup: "/tmp/cg"}), "/tmp/cg:/sys/fs/cgroup:rw"},
	}
	for _, tc := range tests {
		if got := nestedCgroupBind(tc.fs); got != tc.want {
			t.Errorf("%s: bind %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestNestedCgroupParents(t *testing.T) {
	tests := []struct {
		desc, driver, outer, inner string
	}{
		{"cgroupfs: a path under /ctrperf for both", "cgroupfs", "/ctrperf/ctrperf-nested-overlay2-r1", "/ctrperf/ctrperf-nested-overlay2-r1"},
		{"no driver reported: cgroupfs", "", "/ctrperf/ctrperf-nested-overlay2-r1", "/ctrperf/ctrperf-nested-overlay2-r1"},
		{"systemd: ctrperf's slice outside, its path inside", "systemd", "ctrperf.slice", "/ctrperf.slice/ctrperf-nested-overlay2-r1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			outer, inner := nestedCgroupParents(tc.driver, "ctrperf-nested-overlay2-r1")
			if outer != tc.outer || inner != tc.inner {
				t.Errorf("= %q %q, want %q %q", outer, inner, tc.outer, tc.inner)
			}
		})
	}
}
