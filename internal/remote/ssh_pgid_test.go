package remote

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ctrperf/internal/plan"
)

// fakeSSH stands for ssh: it says ready, notes a SIGINT in $CTRPERF_MARK
// and ends on SIGTERM (the orderly shutdown's).
const fakeSSH = `#!/bin/sh
trap 'echo SIGINT > "$CTRPERF_MARK"' INT
trap 'exit 0' TERM
echo ready
while :; do sleep 5 & wait $!; done
`

// TestSSHOutlivesCtrlC: Ctrl-C (SIGINT to the terminal's foreground
// process group) and SIGHUP reach ctrperf, which shuts its sessions down
// in order; they must not reach the ssh clients under it first. The
// helper is ctrperf in a session of its own (the group a terminal would
// signal), ssh a script that notes a SIGINT.
func TestSSHOutlivesCtrlC(t *testing.T) {
	if os.Getenv("CTRPERF_PGID_HELPER") != "" {
		pgidHelper()
		return
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "mark")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSSHOutlivesCtrlC$")
	cmd.Env = append(os.Environ(), "CTRPERF_PGID_HELPER=1", "CTRPERF_MARK="+mark, "PATH="+dir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.TrimSpace(lines.Text()) == want {
				return
			}
		}
		t.Fatalf("the helper ended before %q", want)
	}
	expect("ready") // the fake ssh runs
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect("closed") // the helper caught it and ended ssh in order
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Errorf("the ssh client got ctrperf's Ctrl-C (%s): its agent would be cut off before the orderly shutdown", strings.TrimSpace(string(b)))
	}
}

// pgidHelper is ctrperf: it starts ssh as a session does, and on SIGINT
// ends it with SIGTERM, as the orderly shutdown's Close does.
func pgidHelper() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGHUP)
	d, _ := plan.ParseDest("far")
	cmd := SSHOptions{}.command(context.Background(), d, "agent")
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		os.Exit(2)
	}
	<-sig
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	os.Stdout.WriteString("closed\n")
	os.Exit(0)
}
