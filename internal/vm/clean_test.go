package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeQEMU is a process whose command line names guest as QEMU's does
// (-name NAME), standing for a dead session's QEMU.
func fakeQEMU(t *testing.T, guest string) *exec.Cmd {
	t.Helper()
	// "; :" keeps the shell from exec'ing the sleep (dash does for a last
	// command), which would take "-name guest" off the command line the
	// cleaner reads. A group of its own, killed whole: the shell's sleep
	// would otherwise outlive the test for ten minutes, holding the
	// descriptors it inherited (a flock of whoever ran the test among them).
	cmd := exec.Command("sh", "-c", "sleep 600; :", "-name", guest)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
	})
	// Start returns once the child is forked, maybe before it has exec'd
	// the shell: until then its command line is this test binary's, and
	// the cleaner rightly takes it for another process (the test failed
	// once so, "QEMU killed false"). Wait for the shell's.
	want := "\x00-name\x00" + guest + "\x00"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if strings.Contains(string(b), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake QEMU's command line is %q after 10 s, want it to hold %q", b, want)
		}
	}
	return cmd
}

func TestCleanerKillsByPidFileAndOwner(t *testing.T) {
	cases := []struct {
		desc       string
		ownerLives bool
		pidOf      string // whose process the pid file names: "self" the guest's, "other" another's
		wantKilled bool
		wantGone   bool
	}{
		{"a dead session's guest: QEMU killed, everything removed", false, "self", true, true},
		{"a live session's guest is left alone", true, "self", false, false},
		{"a pid file naming another process (pid reused): not signalled, the rest removed", false, "other", false, true},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			runDir, dataDir := t.TempDir(), t.TempDir()
			s := State{Name: "ctrperf-vm-sess-0", RunID: "sess", Dir: filepath.Join(runDir, "ctrperf-vm-sess-0"),
				DataDir: filepath.Join(dataDir, "ctrperf-vm-sess-0"), Tap: "ctrperf-vmtest"}
			for _, d := range []string{s.Dir, s.DataDir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.save(); err != nil {
				t.Fatal(err)
			}
			name := s.Name
			if c.pidOf == "other" {
				name = "ctrperf-vm-someone-else"
			}
			q := fakeQEMU(t, name)
			if err := os.WriteFile(s.pidFile(), []byte(strconv.Itoa(q.Process.Pid)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			orphan := filepath.Join(dataDir, "ctrperf-vm-gone-3")
			if err := os.MkdirAll(orphan, 0o755); err != nil {
				t.Fatal(err)
			}
			var asked []string
			cl := Cleaner{RunDir: runDir, DataDir: dataDir, ProcRoot: "/proc", Keep: func(what string, st State) bool {
				asked = append(asked, st.RunID)
				return c.ownerLives
			}}
			removed, err := cl.Clean(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(asked, []string{"sess"}) {
				t.Errorf("owner asked for %v, want the guest's session", asked)
			}
			// A killed child is a zombie until this test waits for it.
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(q.Process.Pid) + "/stat")
			killed := err != nil || zombie(string(stat))
			if killed != c.wantKilled {
				t.Errorf("QEMU killed %v (%v), want %v", killed, q.ProcessState, c.wantKilled)
			}
			_, err = os.Stat(s.Dir)
			if gone := os.IsNotExist(err); gone != c.wantGone {
				t.Errorf("run directory gone %v, want %v; removed %v", gone, c.wantGone, removed)
			}
			if _, err := os.Stat(s.DataDir); os.IsNotExist(err) != c.wantGone {
				t.Errorf("overlay directory gone %v, want %v", os.IsNotExist(err), c.wantGone)
			}
			if _, err := os.Stat(orphan); !os.IsNotExist(err) || !slices.ContainsFunc(removed, func(r string) bool { return strings.Contains(r, orphan) }) {
				t.Errorf("an overlay no state names stays (%v); removed %v", err, removed)
			}
		})
	}
}
