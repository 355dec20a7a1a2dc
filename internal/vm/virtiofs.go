package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// virtiofsdPaths are where Debian installs virtiofsd: its own package
// (the Rust daemon, Debian 13) and qemu-system-common's (QEMU 7.2's C
// daemon, Debian 12).
var virtiofsdPaths = []string{"/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd"}

// ErrNoVirtiofsd is why disk: virtiofs does not run here.
var ErrNoVirtiofsd = fmt.Errorf("virtiofsd not installed (Debian package virtiofsd, or qemu-system-common up to QEMU 7.2): disk virtiofs needs it")

// FindVirtiofsd is virtiofsd's path, from PATH or where Debian puts it.
func FindVirtiofsd(lookPath func(string) (string, error), exists func(string) bool) (string, error) {
	if p, err := lookPath("virtiofsd"); err == nil {
		return p, nil
	}
	for _, p := range virtiofsdPaths {
		if exists(p) {
			return p, nil
		}
	}
	return "", ErrNoVirtiofsd
}

// virtiofsdArgs is virtiofsd's command line: the guest's data directory
// shared at socket, in the foreground, the guest's page cache as its only
// cache of file data (cache=auto: as a network filesystem does).
func virtiofsdArgs(socket, dir string) []string {
	return []string{"--socket-path=" + socket, "-o", "source=" + dir, "-o", "cache=auto"}
}

// startVirtiofsd shares g's data directory over virtiofsd's socket, and
// waits until it listens (QEMU connects to it at start).
func (g *Guest) startVirtiofsd(ctx context.Context, virtiofsd string) error {
	if virtiofsd == "" {
		return fmt.Errorf("guest %s: %w", g.Name, ErrNoVirtiofsd)
	}
	if err := os.MkdirAll(g.shared(), 0o755); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(g.Dir, "virtiofsd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(virtiofsd, virtiofsdArgs(g.virtiofsSocket(), g.shared())...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("guest %s: start %s: %w", g.Name, virtiofsd, err)
	}
	g.virtiofsd, g.virtiofsdExited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(g.virtiofsdExited)
	}()
	// Its pid for clean, which kills it only when its command line names
	// this guest's socket.
	if err := os.WriteFile(g.virtiofsdPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(g.virtiofsSocket()); err == nil {
			return nil
		}
		select {
		case <-g.virtiofsdExited:
			return fmt.Errorf("guest %s: virtiofsd exited: %s", g.Name, consoleTail(filepath.Join(g.Dir, "virtiofsd.log"), 5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// virtiofsdPID is the pid in s's virtiofsd pid file when that process is
// s's virtiofsd (its command line names s's socket), else 0.
func virtiofsdPID(s State, procRoot string) int {
	b, err := os.ReadFile(s.virtiofsdPIDFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	cmdline, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return 0
	}
	for _, a := range strings.Split(string(cmdline), "\x00") {
		if a == "--socket-path="+s.virtiofsSocket() {
			return pid
		}
	}
	return 0
}
