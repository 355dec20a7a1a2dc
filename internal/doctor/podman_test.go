package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPodmanCapability: runtime podman is usable with podman on PATH,
// netavark and aardvark-dns in /usr/lib/podman, as root; otherwise the
// reason names what is missing.
func TestPodmanCapability(t *testing.T) {
	tests := []struct {
		desc   string
		tools  []string
		libs   []string
		euid   int
		usable bool
		reason string
	}{
		{"everything, as root", []string{"podman"}, []string{"netavark", "aardvark-dns"}, 0, true, "/usr/bin/podman with netavark"},
		{"no podman", nil, []string{"netavark", "aardvark-dns"}, 0, false, "Debian packages podman not installed"},
		{"podman without netavark (CNI would be its backend)", []string{"podman"}, []string{"aardvark-dns"}, 0, false, "Debian packages netavark not installed"},
		{"nothing", nil, nil, 0, false, "Debian packages podman, netavark, aardvark-dns not installed"},
		{"not root", []string{"podman"}, []string{"netavark", "aardvark-dns"}, 1000, false, "rootful Podman: run ctrperf as root"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			usr := t.TempDir()
			for _, l := range tc.libs {
				p := filepath.Join(usr, "lib/podman", l)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			o := defaultOptions()
			o.lookPath, o.usrRoot, o.geteuid = lookIn(tc.tools...), usr, func() int { return tc.euid }
			f := &Facts{}
			if err := collectPodman(context.Background(), o, f); err != nil {
				t.Fatal(err)
			}
			if f.Podman.Usable != tc.usable || !strings.Contains(f.Podman.Reason, tc.reason) {
				t.Errorf("podman capability %+v, want usable %v and a reason with %q", f.Podman, tc.usable, tc.reason)
			}
		})
	}
}
