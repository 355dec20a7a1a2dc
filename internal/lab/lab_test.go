package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
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
)

func TestParseHexAddrPort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0100007F:0016", "127.0.0.1:22"},
		{"01C813C6:D2F4", "198.19.200.1:54004"},
		{"0000000000000000FFFF000001C813C6:0016", "198.19.200.1:22"},
		{"00000000000000000000000001000000:1F90", "[::1]:8080"},
	} {
		got, err := parseHexAddrPort(c.in)
		if err != nil || got.String() != c.want {
			t.Errorf("parseHexAddrPort(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0100007F", "XX00007F:0016", "0100007F:XYZ", "01007F:0016", "0100007F:10000"} {
		if got, err := parseHexAddrPort(bad); err == nil {
			t.Errorf("parseHexAddrPort(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseProcNetTCP(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 02C813C6:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41071 1 0000000000000000 100 0 0 10 0
   1: 02C813C6:0016 01C813C6:D2F4 01 00000000:00000000 02:000A8E2F 00000000     0        0 43210 4 0000000000000000 20 4 30 10 -1
   2: 02C813C6:0016 01C813C6:D2F6 06 00000000:00000000 03:00000A2F 00000000     0        0 0 3 0000000000000000
`
	m := map[uint64]netip.AddrPort{}
	if err := parseProcNetTCP(strings.NewReader(table), m); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{41071: "0.0.0.0:0", 43210: "198.19.200.1:54004"}
	if len(m) != len(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k].String() != v {
			t.Errorf("inode %d: got %v, want %s", k, m[k], v)
		}
	}
	if err := parseProcNetTCP(strings.NewReader("head\n 0: 0100007F:0016 bad 01 a b c d e f\n"), m); err == nil {
		t.Error("a bad remote address parsed")
	}
}

func TestParseStatAndDescendants(t *testing.T) {
	lines := []string{
		"10 (sshd) S 1 10 10 0 -1",
		"20 (sshd: root [priv]) S 10 20 20 0 -1",
		"21 (sshd: root@notty) S 20 20 20 0 -1",
		"22 (a (b) c) S 21 20 20 0 -1",
		"30 (sshd: root [priv]) S 10 30 30 0 -1",
	}
	var procs []proc
	for _, l := range lines {
		p, ok := parseStat(l)
		if !ok {
			t.Fatalf("parseStat(%q) failed", l)
		}
		procs = append(procs, p)
	}
	if procs[3].comm != "a (b) c" || procs[3].ppid != 21 {
		t.Errorf("parseStat kept %+v", procs[3])
	}
	var got []int
	for _, p := range descendants(procs, 20) {
		got = append(got, p.pid)
	}
	if !slices.Equal(got, []int{20, 21, 22}) {
		t.Errorf("descendants of 20 = %v, want [20 21 22]", got)
	}
	for _, bad := range []string{"", "10 sshd S 1", "x (sshd) S 1", "10 (sshd) S"} {
		if _, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// --- with the lab ----------------------------------------------------------------

func ssh(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := SSH(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("ssh %s %s: %v: %s", host, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestHostsLab(t *testing.T) {
	Require(t)
	// This machine, as the hosts reach it.
	l, err := net.Listen("tcp", BridgeAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "this-machine")
			c.Close()
		}
	}()
	hostPort := l.Addr().(*net.TCPAddr).Port
	for _, h := range Hosts {
		t.Run(h, func(t *testing.T) {
			if got := strings.TrimSpace(ssh(t, h, "hostname")); got != h {
				t.Errorf("hostname %q, want %q", got, h)
			}
			// Its own interfaces, in /proc and in /sys.
			want := []string{"eth0", "lo"}
			if h == Sut {
				want = []string{"docker0", "eth0", "lo"}
			}
			if got := strings.Fields(ssh(t, h, "ls", "/sys/class/net")); !slices.Equal(got, want) {
				t.Errorf("/sys/class/net: %v, want %v", got, want)
			}
			dev := ssh(t, h, "cat", "/proc/net/dev")
			if !strings.Contains(dev, "eth0:") || strings.Contains(dev, Bridge) {
				t.Errorf("/proc/net/dev is not the host's own:\n%s", dev)
			}
			if got := ssh(t, h, "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(got, " "+Addr[h]+"/24 ") {
				t.Errorf("eth0: %s, want %s/24", got, Addr[h])
			}
			// The other host and this machine answer.
			other := Load
			if h == Load {
				other = Sut
			}
			if got := ssh(t, h, "timeout", "5", "bash", "-c", "'exec 3<>/dev/tcp/"+Addr[other]+"/22; head -c 7 <&3'"); got != "SSH-2.0" {
				t.Errorf("%s -> %s:22: %q, want SSH-2.0", h, other, got)
			}
			if got := ssh(t, h, "timeout", "5", "bash", "-c", fmt.Sprintf("'exec 3<>/dev/tcp/%s/%d; cat <&3'", BridgeAddr, hostPort)); got != "this-machine\n" {
				t.Errorf("%s -> this machine: %q", h, got)
			}
		})
	}
}

// TestPrivatePathsLab: what a host writes under its private paths is its
// own, on neither this machine nor the other host.
func TestPrivatePathsLab(t *testing.T) {
	Require(t)
	name := fmt.Sprintf("ctrperf-labtest-%d", os.Getpid())
	for _, dir := range []string{"/root/.cache", "/run/ctrperf", "/var/lib/ctrperf", "/tmp"} {
		p := filepath.Join(dir, name)
		ssh(t, Sut, "mkdir", "-p", dir, "&&", "echo", Sut, ">", p)
		t.Cleanup(func() { SSH(context.Background(), Sut, "rm", "-f", p) })
		if got := ssh(t, Sut, "cat", p); got != Sut+"\n" {
			t.Errorf("lab-sut reads %q from %s", got, p)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s written on lab-sut appears on this machine", p)
		}
		if out, err := SSH(context.Background(), Load, "test", "!", "-e", p); err != nil {
			t.Errorf("%s written on lab-sut appears on lab-load: %v %s", p, err, out)
		}
		// From this machine, the host's view is reachable through Root.
		r, err := Root(Sut, p)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(r); err != nil || string(b) != Sut+"\n" {
			t.Errorf("Root(%s): %q, %v", p, b, err)
		}
	}
}

// probeImage builds testdata/probe (static) and imports it into lab-sut's
// engine as a FROM-scratch image; removed when the test ends.
func probeImage(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "probe", Mode: 0o755, Size: int64(len(b))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(b)
	tw.Close()
	const image = "ctrperf/lab-probe:test"
	imp := exec.Command("ssh", "-F", SSHConfig, Sut, "docker", "import",
		"--change", "'ENTRYPOINT [\"/probe\"]'", "--change", "'LABEL ctrperf.managed=true'", "-", image)
	imp.Stdin = &buf
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import on lab-sut: %v: %s", err, out)
	}
	t.Cleanup(func() { SSH(context.Background(), Sut, "docker", "rmi", "-f", image) })
	return image
}

func inPrefix(t *testing.T, addr, prefix string) bool {
	t.Helper()
	a, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return netip.MustParsePrefix(prefix).Contains(a)
}

func TestDockerLab(t *testing.T) {
	Require(t)
	if got := strings.TrimSpace(ssh(t, Sut, "docker", "info", "--format", "'{{.Name}} {{.DockerRootDir}} {{.CgroupDriver}}'")); got != "lab-sut /var/lib/docker cgroupfs" {
		t.Errorf("lab-sut's engine: %q", got)
	}
	if out, err := SSH(context.Background(), Load, "docker", "info"); err == nil || !strings.Contains(string(out), "Cannot connect to the Docker daemon") {
		t.Errorf("lab-load has a Docker engine? %v: %s", err, out)
	}
	image := probeImage(t)
	// The default bridge: lab-sut's docker0, its cgroups under /ctrperf-lab-sut.
	out := ssh(t, Sut, "docker", "run", "--rm", "--label", "ctrperf.managed=true", image, "addrs")
	addr, cg := "", false
	for _, l := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(l, "addr "); ok {
			addr = a
		}
		cg = cg || strings.Contains(l, ":/"+CgroupName+"/")
	}
	if addr == "" || !inPrefix(t, addr, Pools[0]) {
		t.Errorf("container on the default bridge has %q, want an address in %s:\n%s", addr, Pools[0], out)
	}
	if !cg {
		t.Errorf("container's cgroups are not under /%s:\n%s", CgroupName, out)
	}
	// A network of its own comes from the pools.
	const netName = "ctrperf-labtest-net"
	ssh(t, Sut, "docker", "network", "create", "--label", "ctrperf.managed=true", netName)
	t.Cleanup(func() { SSH(context.Background(), Sut, "docker", "network", "rm", netName) })
	subnet := strings.TrimSpace(ssh(t, Sut, "docker", "network", "inspect", "-f", "'{{(index .IPAM.Config 0).Subnet}}'", netName))
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !(netip.MustParsePrefix(Pools[1]).Overlaps(p) || netip.MustParsePrefix(Pools[2]).Overlaps(p)) || p.Bits() != 24 {
		t.Errorf("network %s has subnet %q, want a /24 of %v", netName, subnet, Pools[1:])
	}
	out = ssh(t, Sut, "docker", "run", "--rm", "--network", netName, image, "addrs")
	if a, _, _ := strings.Cut(strings.TrimPrefix(out, "addr "), "\n"); !inPrefix(t, a, subnet) {
		t.Errorf("container on %s has %s, not in %s", netName, a, subnet)
	}
	// A published port of lab-sut answers lab-load, as across machines.
	const serve = "ctrperf-labtest-serve"
	ssh(t, Sut, "docker", "run", "-d", "--name", serve, "--label", "ctrperf.managed=true", "-p", "18080:8080", image, "serve", ":8080")
	t.Cleanup(func() { SSH(context.Background(), Sut, "docker", "rm", "-f", serve) })
	var got string
	for i := 0; i < 50 && got != "ctrperf-lab-probe\n"; i++ {
		o, _ := SSH(context.Background(), Load, "timeout", "5", "bash", "-c", "'exec 3<>/dev/tcp/"+Addr[Sut]+"/18080 && cat <&3'")
		got = string(o)
		time.Sleep(100 * time.Millisecond)
	}
	if got != "ctrperf-lab-probe\n" {
		t.Errorf("lab-load -> lab-sut:18080 answered %q", got)
	}
	// The default engine of this machine (when one answers) knows nothing
	// of it.
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "name="+serve).Output(); err == nil && len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("the default engine lists lab-sut's container: %s", out)
	}
}

func TestHostKeysLab(t *testing.T) {
	Require(t)
	run := func(config string, opts ...string) (string, error) {
		args := append([]string{"-F", config}, opts...)
		out, err := exec.Command("ssh", append(args, Sut, "true")...).CombinedOutput()
		return string(out), err
	}
	t.Run("unknown", func(t *testing.T) {
		cfg, kh := UnknownHostKeyConfig(t)
		if out, err := run(cfg); err == nil || !strings.Contains(out, "Host key verification failed") {
			t.Fatalf("an unknown host key was not refused: %v: %s", err, out)
		}
		// accept-new writes it; then it is known.
		if out, err := run(cfg, "-o", "StrictHostKeyChecking=accept-new"); err != nil {
			t.Fatalf("accept-new: %v: %s", err, out)
		}
		if b, _ := os.ReadFile(kh); !bytes.Contains(b, []byte(Addr[Sut])) {
			t.Errorf("accept-new wrote %q", b)
		}
		if out, err := run(cfg); err != nil {
			t.Errorf("the accepted key: %v: %s", err, out)
		}
	})
	t.Run("changed", func(t *testing.T) {
		fresh := ChangeHostKey(t, Sut)
		if out, err := run(SSHConfig); err == nil || !strings.Contains(out, "REMOTE HOST IDENTIFICATION HAS CHANGED") {
			t.Fatalf("a changed host key was not refused: %v: %s", err, out)
		}
		if out, err := run(SSHConfig, "-o", "StrictHostKeyChecking=accept-new"); err == nil {
			t.Errorf("accept-new took a changed key: %s", out)
		}
		if b, _ := os.ReadFile(KnownHosts); bytes.Contains(b, []byte(strings.Fields(fresh)[1])) {
			t.Errorf("the changed key got into %s", KnownHosts)
		}
	})
	// The original key is back.
	if out, err := run(SSHConfig); err != nil {
		t.Errorf("after ChangeHostKey's cleanup: %v: %s", err, out)
	}
}

func TestCutSessionLab(t *testing.T) {
	Require(t)
	marker := fmt.Sprintf("sleep %d", 300+os.Getpid()%100)
	cmd := exec.Command("ssh", "-F", SSHConfig, Sut, "echo ready; exec "+marker)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("session: %q %v", buf, err)
	}
	s, err := CutSession(Sut, marker, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The orphaned command is the far side's to clean (the agent's
	// watchdog); here, the test's.
	for pid, c := range s.Commands {
		if strings.Contains(c, marker) {
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		}
	}
	// Root's session is one sshd process (no privilege separation child
	// after authentication), the listener's child.
	if s.Remote.Addr().String() != BridgeAddr || len(s.SSHD) == 0 || s.SSHD[0] != s.PID {
		t.Errorf("session %+v: want a client at %s and the session's sshd", s, BridgeAddr)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("ssh exited 0 after its session was cut")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ssh still runs 15 s after its session was cut")
	}
	ss, err := Sessions(Sut)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ss {
		if x.PID == s.PID {
			t.Errorf("session %d still listed", s.PID)
		}
	}
}

func TestSmallFSLab(t *testing.T) {
	Require(t)
	dir := fmt.Sprintf("/var/lib/ctrperf/labtest-full-%d", os.Getpid())
	SmallFS(t, Sut, dir, 1<<20)
	t.Cleanup(func() { SSH(context.Background(), Sut, "rmdir", dir) })
	out, err := SSH(context.Background(), Sut, "dd", "if=/dev/zero", "of="+dir+"/x", "bs=1M", "count=2")
	if err == nil || !strings.Contains(string(out), "No space left on device") {
		t.Errorf("writing 2 MiB into a 1 MiB filesystem: %v: %s", err, out)
	}
}

// --- down and up -----------------------------------------------------------------

// labObjects lists what of the lab exists on this machine, found without
// scripts/lab.sh: processes in the given namespaces or naming the lab,
// netns names, links, the iptables chain, cgroups, mounts and files.
// livePIDs is the set of processes that exist now.
func livePIDs() map[int]bool {
	live := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			live[pid] = true
		}
	}
	return live
}

func labObjects(t *testing.T, nsLinks []string) []string {
	t.Helper()
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, kind := range []string{"mnt", "net"} {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
			if l != "" && slices.Contains(nsLinks, l) {
				out = append(out, fmt.Sprintf("process %d in %s (%s)", pid, l, cmdline(pid)))
				break
			}
		}
		// Server side only: an ssh client of the lab (someone's, on this
		// machine) is not the lab's.
		if comm, _ := kfs.Comm(pid); comm == "ssh" {
			continue
		}
		if c := cmdline(pid); strings.Contains(c, "/"+CgroupName) || strings.Contains(c, Dir) {
			out = append(out, fmt.Sprintf("process %d: %s", pid, c))
		}
	}
	for _, h := range Hosts {
		if _, err := os.Lstat(filepath.Join(netnsDir, h)); err == nil {
			out = append(out, "netns "+h)
		}
	}
	for _, l := range append([]string{Bridge}, Veth[Sut], Veth[Load]) {
		if _, err := net.InterfaceByName(l); err == nil {
			out = append(out, "link "+l)
		}
	}
	if rules, err := exec.Command("iptables", "-w", "-S").Output(); err != nil {
		t.Fatalf("iptables -S: %v", err)
	} else if bytes.Contains(rules, []byte(Chain)) {
		out = append(out, "iptables chain "+Chain)
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + CgroupName)
	for _, c := range cgs {
		out = append(out, "cgroup "+c)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		t.Fatal(err)
	} else {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, Dir) || strings.Contains(l, "ctrperf-lab") {
				out = append(out, "mount "+l)
			}
		}
	}
	for _, p := range []string{Dir, RunDir} {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, "path "+p)
		}
	}
	return out
}

func labScript(t *testing.T, arg string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := exec.Command("../../scripts/lab.sh", arg).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/lab.sh %s: %v: %s", arg, err, out)
	}
	return string(out), time.Since(start)
}

// TestDownUpLab takes the lab down with a container running on lab-sut and
// an open ssh session, checks that nothing of it is left, and brings it up
// again (it must be up after the test, for the packages that follow).
func TestDownUpLab(t *testing.T) {
	Require(t)
	image := probeImage(t)
	ssh(t, Sut, "docker", "run", "-d", "--name", "ctrperf-labtest-down", "--label", "ctrperf.managed=true", image, "serve", ":8080")
	// A session that is open (not still being made) when the lab goes.
	session := exec.Command("ssh", "-F", SSHConfig, Load, "echo ready; exec sleep 600")
	stdout, err := session.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	defer session.Process.Kill()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("session to lab-load: %q %v", buf, err)
	}
	var nsLinks, pids []string
	for _, h := range Hosts {
		hp, err := Holder(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"mnt", "net"} {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", hp, kind))
			if err != nil {
				t.Fatal(err)
			}
			nsLinks = append(nsLinks, l)
		}
		ps, _ := Processes(h)
		for _, p := range ps {
			pids = append(pids, strconv.Itoa(p))
		}
	}
	before := labObjects(t, nsLinks)
	for _, want := range []string{"netns lab-sut", "netns lab-load", "link " + Bridge, "iptables chain " + Chain, "path " + Dir, "path " + RunDir} {
		if !slices.Contains(before, want) {
			t.Errorf("before down, the listing lacks %q: %v", want, before)
		}
	}
	if !slices.ContainsFunc(before, func(s string) bool { return strings.HasPrefix(s, "cgroup ") }) ||
		!slices.ContainsFunc(before, func(s string) bool { return strings.Contains(s, "containerd-shim") }) {
		t.Errorf("before down, the listing lacks the container's cgroups or shim: %v", before)
	}
	mainEngine, _ := os.ReadFile("/run/ctrperf-dockerd.pid")

	existed := livePIDs()
	out, took := labScript(t, "down")
	t.Logf("lab down with a container and a session: %v\n%s", took, out)
	// The session's client may or may not see its connection closed (a
	// host that vanishes need not say goodbye; ssh without
	// ServerAliveInterval then waits): it is this test's process, not the
	// lab's, and is killed by the deferred Kill.
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }()
	select {
	case err := <-ended:
		t.Logf("the ssh session to lab-load ended: %v", err)
	case <-time.After(3 * time.Second):
		t.Log("the ssh session to lab-load still runs 3 s after lab down (no FIN reached it)")
	}
	// A namespace's inode number is reused once it is freed: a process
	// started after down (another package's container, beside this one)
	// may sit in a new namespace with the lab's old number. Only a process
	// that existed before down can be the lab's leftover.
	var left []string
	for _, l := range labObjects(t, nsLinks) {
		var pid int
		if n, _ := fmt.Sscanf(l, "process %d in ", &pid); n == 1 && !existed[pid] {
			t.Logf("not the lab's (started after down, in a namespace with a reused number): %s", l)
			continue
		}
		left = append(left, l)
	}
	if len(left) > 0 {
		t.Errorf("after lab down, left:\n%s", strings.Join(left, "\n"))
	}
	for _, p := range pids {
		n, _ := strconv.Atoi(p)
		if alive(n) {
			t.Errorf("pid %d of the lab survived down: %s", n, cmdline(n))
		}
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(mainEngine))); err == nil && !alive(pid) {
		t.Errorf("the default engine (pid %d) is gone after lab down", pid)
	}
	if out, took := labScript(t, "down"); strings.TrimSpace(out) != "" {
		t.Errorf("a second down did something (%v): %s", took, out)
	}

	out, took = labScript(t, "up")
	t.Logf("lab up: %v\n%s", took, out)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != SSHConfig {
		t.Errorf("up does not end with the ssh_config path: %s", out)
	}
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	holder, _ := Holder(Sut)
	out, took = labScript(t, "up")
	t.Logf("lab up again: %v\n%s", took, out)
	if again, _ := Holder(Sut); again != holder || strings.Contains(out, "pid") {
		t.Errorf("a second up remade the lab (holder %d then %d): %s", holder, again, out)
	}
}
