package engine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"ctrperf/internal/kernel"
)

// A service's data directory is as open as its workload needs, and what
// leads to it is closed to every other local user (issue 24: bind
// directories were 0777 under 0755 parents), also when an older ctrperf
// made the parents 0755.
func TestMakeDataDir(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	tests := []struct {
		desc     string
		existing map[string]os.FileMode // made before, relative to the root's parent
		leaf     os.FileMode
	}{
		{desc: "fresh: a container's leaf open, parents closed", leaf: dataLeafOpen},
		{desc: "fresh: a host service's leaf", leaf: dataLeafRoot},
		{desc: "parents an older ctrperf left open are closed",
			existing: map[string]os.FileMode{"bind": 0o755, "bind/r1": 0o777, "bind/r1/app": 0o755}, leaf: dataLeafOpen},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			base := t.TempDir()
			for _, p := range []string{"bind", "bind/r1", "bind/r1/app"} {
				if m, ok := tc.existing[p]; ok {
					if err := os.Mkdir(filepath.Join(base, p), m); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(filepath.Join(base, p), m); err != nil {
						t.Fatal(err)
					}
				}
			}
			root := filepath.Join(base, "bind")
			dir, err := makeDataDir(root, "r1", "app", tc.leaf)
			if err != nil {
				t.Fatal(err)
			}
			if dir != filepath.Join(root, "r1", "app") {
				t.Errorf("dir = %s", dir)
			}
			for p, want := range map[string]os.FileMode{root: 0o700, filepath.Join(root, "r1"): 0o700, dir: tc.leaf} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("%s: mode %#o, want %#o", p, got, want)
				}
			}
		})
	}
}

// hasMountOptions reports the mount options of the mount at point, and
// whether every one of want is among them.
func hasMountOptions(t *testing.T, point string, want ...string) ([]string, bool) {
	t.Helper()
	mnts, err := kernel.Mounts(kernel.ProcMount)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(mnts) - 1; i >= 0; i-- { // the topmost mount at point
		if m := mnts[i]; m.Point == point {
			for _, w := range want {
				if !contains(m.Options, w) {
					return m.Options, false
				}
			}
			return m.Options, true
		}
	}
	return nil, false
}
