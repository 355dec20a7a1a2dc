package lab

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/kernel"
)

// Fixtures for the faults an SSH client of the lab must meet. Each undoes
// itself when the test ends (t.Cleanup).

// UnknownHostKeyConfig writes a copy of the lab's ssh_config whose
// UserKnownHostsFile is an empty file of the test's own: every host's key
// is unknown there. It returns the config and that known_hosts (which a
// client told to accept new keys may write).
func UnknownHostKeyConfig(t testing.TB) (config, knownHosts string) {
	t.Helper()
	b, err := os.ReadFile(SSHConfig)
	if err != nil {
		t.Fatalf("lab ssh_config: %v (make lab-up)", err)
	}
	dir := t.TempDir()
	knownHosts = filepath.Join(dir, "known_hosts")
	config = filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(knownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(string(b), KnownHosts, knownHosts)), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, knownHosts
}

// ChangeHostKey makes host present a new host key (a fresh ed25519 key,
// not the one in the lab's known_hosts) until the test ends, when the
// original comes back. sshd rereads its configuration on SIGHUP (it
// re-executes itself, same pid); both ways the change is confirmed with
// ssh-keyscan before returning. It returns the new key's public line.
func ChangeHostKey(t testing.TB, host string) string {
	t.Helper()
	etc := filepath.Join(HostDir(host), "etc-ssh")
	changed := filepath.Join(etc, "ssh_host_ed25519_key.changed")
	os.Remove(changed)
	os.Remove(changed + ".pub")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host+"-changed", "-f", changed).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	original, err := publicKey(filepath.Join(etc, "ssh_host_ed25519_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := publicKey(changed + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	// Inside the host, etc-ssh is its /etc/ssh.
	if err := useHostKey(host, hostKey+".changed", fresh); err != nil {
		t.Fatalf("change %s's host key: %v", host, err)
	}
	t.Cleanup(func() {
		if err := useHostKey(host, hostKey, original); err != nil {
			t.Errorf("restore %s's host key: %v", host, err)
		}
		os.Remove(changed)
		os.Remove(changed + ".pub")
	})
	return fresh
}

// useHostKey points host's sshd_config at key (a path inside the host),
// reloads sshd and waits until it presents want ("type base64").
func useHostKey(host, key, want string) error {
	cfg := filepath.Join(HostDir(host), "etc-ssh", "sshd_config")
	b, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, "HostKey ") {
			lines[i], found = "HostKey "+key, true
		}
	}
	if !found {
		return fmt.Errorf("%s has no HostKey line", cfg)
	}
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	pid, err := SSHD(host)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		out, _ := exec.CommandContext(ctx, "ssh-keyscan", "-t", "ed25519", Addr[host]).Output()
		cancel()
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && !strings.HasPrefix(l, "#") {
				got = f[1] + " " + f[2]
			}
		}
		if got == want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("sshd of %s presents %q, not %q, 15 s after SIGHUP", host, got, want)
}

func publicKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return "", fmt.Errorf("%s: not a public key", path)
	}
	return f[0] + " " + f[1], nil
}

// A Session is one SSH connection to a lab host, as its sshd serves it.
type Session struct {
	Host   string
	PID    int            // the per-connection sshd, a child of the listener
	Remote netip.AddrPort // the client's end of the connection
	SSHD   []int          // the session's sshd processes (PID and its sshd descendants)
	// Commands are the other descendants (what the session runs), pid ->
	// command line.
	Commands map[int]string
}

// Runs reports whether one of the session's commands contains s.
func (s Session) Runs(sub string) bool {
	for _, c := range s.Commands {
		if strings.Contains(c, sub) {
			return true
		}
	}
	return false
}

// Sessions lists host's SSH sessions: one per connection, each the sshd
// child of the listener serving it.
func Sessions(host string) ([]Session, error) {
	listener, err := SSHD(host)
	if err != nil {
		return nil, err
	}
	procs, err := processTable()
	if err != nil {
		return nil, err
	}
	conns, err := tcpConnections(listener)
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, p := range procs {
		// A killed session's sshd stays a zombie until the listener
		// reaps it: it serves no one any more.
		if p.ppid != listener || p.state == 'Z' || p.state == 'X' {
			continue
		}
		s := Session{Host: host, PID: p.pid, Commands: map[int]string{}}
		for _, d := range descendants(procs, p.pid) {
			if d.comm == "sshd" {
				s.SSHD = append(s.SSHD, d.pid)
			} else {
				s.Commands[d.pid] = cmdline(d.pid)
			}
		}
		for _, inode := range socketInodes(p.pid) {
			if c, ok := conns[inode]; ok {
				s.Remote = c
				break
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// KillSession cuts s's connection the hard way: SIGKILL to its sshd
// processes (not to the commands it runs, which see their pipes close, as
// after a network cut or a crash of sshd). It waits until they are gone.
func KillSession(s Session) error {
	var errs []error
	for _, pid := range s.SSHD {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill sshd %d: %w", pid, err))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range s.SSHD {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			errs = append(errs, fmt.Errorf("sshd %d outlived SIGKILL", pid))
		}
	}
	return errors.Join(errs...)
}

// CutSession waits (up to timeout) for a session of host whose commands
// contain sub (e.g. "ctrperf agent") and kills it with KillSession. It
// returns the session as it was, for its Commands.
func CutSession(host, sub string, timeout time.Duration) (Session, error) {
	return cutSessionWhere(host, timeout, func(s Session) bool { return s.Runs(sub) }, fmt.Sprintf("runs %q", sub))
}

// CutSessionOf kills (KillSession) the session of host that runs process
// pid — one agent among those of tests running side by side — waiting up
// to timeout for it to appear.
func CutSessionOf(host string, pid int, timeout time.Duration) (Session, error) {
	return cutSessionWhere(host, timeout, func(s Session) bool { _, ok := s.Commands[pid]; return ok }, fmt.Sprintf("runs pid %d", pid))
}

func cutSessionWhere(host string, timeout time.Duration, match func(Session) bool, what string) (Session, error) {
	deadline := time.Now().Add(timeout)
	for {
		ss, err := Sessions(host)
		if err != nil {
			return Session{}, err
		}
		for _, s := range ss {
			if match(s) {
				return s, KillSession(s)
			}
		}
		if time.Now().After(deadline) {
			return Session{}, fmt.Errorf("no session of %s %s after %v", host, what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SmallFS mounts a tmpfs of size bytes over dir inside host (made if
// missing) until the test ends: a disk that fills up. What was in dir is
// hidden meanwhile, not lost.
func SmallFS(t testing.TB, host, dir string, size int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := Exec(ctx, host, "mkdir", "-p", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, host, "mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "ctrperf-lab-small", dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := Exec(ctx, host, "umount", dir); err != nil {
			t.Errorf("unmount the small filesystem: %v", err)
		}
	})
}

// --- /proc ---------------------------------------------------------------------

type proc struct {
	pid, ppid int
	comm      string
	state     byte
}

// processTable reads pid, parent and name of every process.
func processTable() ([]proc, error) {
	pids, err := kfs.PIDs()
	if err != nil {
		return nil, err
	}
	var out []proc
	for _, pid := range pids {
		b, err := os.ReadFile(procPath(pid, "stat"))
		if err != nil {
			continue
		}
		if p, ok := parseStat(string(b)); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// parseStat reads "pid (comm) state ppid …"; comm may hold spaces and
// parentheses, so it ends at the last ')'.
func parseStat(s string) (proc, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	f := strings.Fields(s[end+1:])
	if err != nil || len(f) < 2 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, comm: s[open+1 : end], state: f[0][0]}, true
}

// descendants of root (root included), parents before children.
func descendants(procs []proc, root int) []proc {
	var out []proc
	for _, p := range procs {
		if p.pid == root {
			out = append(out, p)
		}
	}
	for i := 0; i < len(out); i++ {
		for _, p := range procs {
			if p.ppid == out[i].pid && p.pid != root {
				out = append(out, p)
			}
		}
	}
	return out
}

func cmdline(pid int) string {
	args, _ := kfs.Cmdline(pid)
	return strings.Join(args, " ")
}

func alive(pid int) bool { return kernel.ProcAlive(kfs.Proc(), pid) }

// socketInodes are the inodes of pid's open sockets.
func socketInodes(pid int) []uint64 {
	dir := procPath(pid, "fd")
	ents, _ := os.ReadDir(dir)
	var out []uint64
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// tcpConnections maps socket inode to remote address for the TCP sockets of
// pid's network namespace (/proc/<pid>/net/tcp and tcp6).
func tcpConnections(pid int) (map[uint64]netip.AddrPort, error) {
	out := map[uint64]netip.AddrPort{}
	for _, f := range []string{"tcp", "tcp6"} {
		path := procPath(pid, "net", f)
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = parseProcNetTCP(fh, out)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}

// parseProcNetTCP adds inode -> rem_address of each line of /proc/net/tcp
// or tcp6 to m. Addresses are hex, in the kernel's byte order per 32-bit
// word (little-endian here); ports are big-endian hex.
func parseProcNetTCP(r io.Reader, m map[uint64]netip.AddrPort) error {
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		ap, err := parseHexAddrPort(f[2])
		if err != nil {
			return err
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return fmt.Errorf("inode %q: %w", f[9], err)
		}
		if inode != 0 {
			m[inode] = ap
		}
	}
	return sc.Err()
}

func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: not 4 or 16 hex bytes", s)
	}
	for i := 0; i < len(raw); i += 4 {
		slices.Reverse(raw[i : i+4])
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", p, err)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
