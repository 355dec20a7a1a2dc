package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseLimits: the hard limits of open files and processes the podman
// service's containers get, from /proc/PID/limits.
func TestParseLimits(t *testing.T) {
	head := "Limit                     Soft Limit           Hard Limit           Units     \n"
	tests := []struct {
		desc, in string
		want     podmanLimits
		err      string
	}{
		{"podman on this machine: nproc lowered to pid_max", head +
			"Max processes             32768                32768                processes \n" +
			"Max open files            20000                20000                files     \n",
			podmanLimits{NoFile: 20000, NProc: 32768}, ""},
		{"unlimited processes", head +
			"Max processes             unlimited            unlimited            processes \n" +
			"Max open files            1024                 1048576              files     \n",
			podmanLimits{NoFile: 1048576, NProc: unix.RLIM_INFINITY}, ""},
		{"a hard limit that does not parse is an error quoting it", head +
			"Max processes             32768                lots                 processes \n" +
			"Max open files            20000                20000                files     \n",
			podmanLimits{}, `hard limit "lots"`},
		{"no such lines", head, podmanLimits{}, "no lines for open files and processes"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseLimits(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseLimits = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestPodmanConfig: every container gets the limits given, unlimited as
// -1, and events go to a file.
func TestPodmanConfig(t *testing.T) {
	got := string(podmanConfig(podmanLimits{NoFile: 20000, NProc: unix.RLIM_INFINITY}))
	for _, want := range []string{`default_ulimits = ["nofile=20000:20000", "nproc=-1:-1"]`, `events_logger = "file"`} {
		if !strings.Contains(got, want) {
			t.Errorf("containers.conf:\n%s\nwant %s", got, want)
		}
	}
}

// TestListPodmanSkipsStatelessDir: a service directory without its state
// yet (another ctrperf between mkdir and its first write) is neither an
// entry nor an error; a state that does not parse still is an error.
func TestListPodmanSkipsStatelessDir(t *testing.T) {
	run := t.TempDir()
	if err := os.MkdirAll(filepath.Join(run, "podman", "ctrperf-podman-starting-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	listed, err := ListPodman(WithRunDir(run))
	if err != nil || len(listed) != 0 {
		t.Fatalf("a directory without state: listed %v, error %v; want nothing and no error", listed, err)
	}
	bad := filepath.Join(run, "podman", "ctrperf-podman-bad-2")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, stateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListPodman(WithRunDir(run)); err == nil {
		t.Error("a state that does not parse was not reported")
	}
}
