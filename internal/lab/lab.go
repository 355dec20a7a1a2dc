// Package lab is the Go side of the lab of scripts/lab.sh (make lab-up):
// two SSH hosts on this machine, lab-sut (with a Docker engine of its own)
// and lab-load, each in network, mount and UTS namespaces of its own. Tests
// that need it end in Lab and call Require; the fixtures of fixtures.go make
// the faults an SSH client must meet (an unknown or a changed host key, a
// connection cut mid-session, a full disk).
//
// The hosts share this machine's kernel: they prove the mechanism of
// ctrperf's `hosts:`, not cross-machine performance.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/labnet"
)

// What lab-up makes: the names and addresses are labnet.env's, which
// scripts/lab.sh sources.
var (
	Dir        = labnet.Get("LAB_DIR")         // keys, ssh_config, known_hosts, hosts' private dirs
	RunDir     = labnet.Get("LAB_RUN")         // pid files
	SSHConfig  = Dir + "/ssh_config"           // ssh -F SSHConfig lab-sut
	KnownHosts = Dir + "/known_hosts"          // both hosts' keys, by name and address
	ClientKey  = Dir + "/id_ed25519"           // root's key on both hosts
	Bridge     = labnet.Get("LAB_BRIDGE")      // LAB_BRIDGE_ADDR/24 on this machine
	BridgeAddr = labnet.Get("LAB_BRIDGE_ADDR") // this machine, as the hosts reach it
	Chain      = labnet.Get("LAB_CHAIN")       // filter chain, jumped to from FORWARD
	CgroupName = labnet.Get("LAB_CGROUP")      // lab-sut's engine's --cgroup-parent
	Sut        = labnet.Get("LAB_SUT")         // the system under test: sshd and a Docker engine
	Load       = labnet.Get("LAB_LOAD")        // the load host: sshd, no Docker
)

const (
	RequireEnv = "CTRPERF_REQUIRE_LAB"           // =1: a test that needs the lab fails without it
	netnsDir   = "/run/netns"                    // where `ip netns` names namespaces
	hostKey    = "/etc/ssh/ssh_host_ed25519_key" // inside each host
)

// kfs is this machine's /proc (the one door to it, internal/kernel).
var kfs = kernel.DefaultFS()

// procPath is <proc>/<pid>/elem….
func procPath(pid int, elem ...string) string {
	return kfs.Proc(append([]string{strconv.Itoa(pid)}, elem...)...)
}

// Hosts are the lab's hosts.
var Hosts = []string{Sut, Load}

// Addr is each host's address on the bridge.
var Addr = map[string]string{Sut: labnet.Get("LAB_SUT_ADDR"), Load: labnet.Get("LAB_LOAD_ADDR")}

// Veth is the host side of each host's veth pair (eth0 inside).
var Veth = map[string]string{Sut: labnet.Get("LAB_SUT_VETH"), Load: labnet.Get("LAB_LOAD_VETH")}

// Pools are lab-sut's engine's addresses: its docker0 (first) and the pools
// of the networks it creates.
var Pools = []string{labnet.Get("LAB_DOCKER_NET"), labnet.Get("LAB_DOCKER_POOL_1"), labnet.Get("LAB_DOCKER_POOL_2")}

// HostDir is where a host's private paths live on this machine:
// HostDir(h)/root is its /root, etc-ssh its /etc/ssh, var-lib-ctrperf its
// /var/lib/ctrperf (and, on lab-sut, etc-docker and docker its /etc/docker
// and /var/lib/docker). Its /run and /tmp are tmpfs, reached from here
// through Root.
func HostDir(host string) string { return filepath.Join(Dir, host) }

// Require skips t unless the lab answers (ssh to lab-sut works), or fails it
// when CTRPERF_REQUIRE_LAB=1.
func Require(t testing.TB) {
	t.Helper()
	if err := Check(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("the lab is needed: %v", err)
		}
		t.Skipf("the lab is needed: %v", err)
	}
}

// Check says why the lab cannot be used, nil when both hosts answer ssh.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root")
	}
	if _, err := os.Stat(SSHConfig); err != nil {
		return fmt.Errorf("%v (make lab-up)", err)
	}
	for _, h := range Hosts {
		if out, err := SSH(context.Background(), h, "true"); err != nil {
			return fmt.Errorf("%s does not answer ssh: %v: %s (make lab-up)", h, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// SSH runs a command on host through plain ssh with the lab's config and
// returns its combined output.
func SSH(ctx context.Context, host string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "ssh", append([]string{"-F", SSHConfig, host}, args...)...).CombinedOutput()
}

// Holder is the pid of host's namespace holder: a process of its
// namespaces that lives as long as the host. It checks that the pid still
// holds the netns named after host, so a reused pid is never taken.
func Holder(host string) (int, error) {
	pid, err := readPID(filepath.Join(RunDir, host+".holder.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: %w (make lab-up)", host, err)
	}
	a, err1 := os.Stat(procPath(pid, "ns", "net"))
	b, err2 := os.Stat(filepath.Join(netnsDir, host))
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%s: %w (make lab-up)", host, err)
	}
	if !os.SameFile(a, b) {
		return 0, fmt.Errorf("%s: pid %d is not its namespace holder (make lab-up)", host, pid)
	}
	return pid, nil
}

// SSHD is the pid of host's sshd listener; its children are the sessions.
func SSHD(host string) (int, error) {
	pid, err := readPID(filepath.Join(RunDir, host+".sshd.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s's sshd: %w", host, err)
	}
	if ok, err := InHost(host, pid); err != nil || !ok {
		return 0, fmt.Errorf("%s's sshd: pid %d is not in its namespaces (%v)", host, pid, err)
	}
	return pid, nil
}

// InHost reports whether pid runs in host's mount namespace.
func InHost(host string, pid int) (bool, error) {
	h, err := Holder(host)
	if err != nil {
		return false, err
	}
	return sameNS(h, pid, "mnt")
}

func sameNS(a, b int, ns string) (bool, error) {
	x, err := os.Readlink(procPath(a, "ns", ns))
	if err != nil {
		return false, err
	}
	y, err := os.Readlink(procPath(b, "ns", ns))
	if err != nil {
		return false, err
	}
	return x == y, nil
}

// Root is host's view of path: /proc/<holder>/root/path, which reads and
// writes the file as host sees it (its /run, /tmp and private mounts).
func Root(host, path string) (string, error) {
	h, err := Holder(host)
	if err != nil {
		return "", err
	}
	return filepath.Join(procPath(h, "root"), path), nil
}

// Command is a command to run inside host's mount, network and UTS
// namespaces (nsenter into its holder), as root, without ssh.
func Command(ctx context.Context, host string, args ...string) (*exec.Cmd, error) {
	h, err := Holder(host)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(h), "-m", "-n", "-u", "-w", "--"}, args...)...), nil
}

// Exec runs a command inside host's namespaces and returns its combined
// output.
func Exec(ctx context.Context, host string, args ...string) ([]byte, error) {
	cmd, err := Command(ctx, host, args...)
	if err != nil {
		return nil, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %s: %w: %s", host, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Processes are the pids in host's mount namespace, its holder included.
func Processes(host string) ([]int, error) {
	h, err := Holder(host)
	if err != nil {
		return nil, err
	}
	mnt, err := os.Readlink(procPath(h, "ns", "mnt"))
	if err != nil {
		return nil, err
	}
	return pidsInNS("mnt", mnt)
}

// pidsInNS lists the processes whose namespace of kind is ns ("mnt:[…]").
func pidsInNS(kind, ns string) ([]int, error) {
	all, err := kfs.PIDs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		if l, err := os.Readlink(procPath(pid, "ns", kind)); err == nil && l == ns {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a pid: %q", path, b)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("pid %d of %s: %w", pid, path, err)
	}
	return pid, nil
}
