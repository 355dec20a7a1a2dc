package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A guest with Docker (vm.docker: true, seed 003's "container in a VM"):
// its disk is the debian-docker rootfs (Debian's docker.io), and its
// init starts dockerd, which starts its containerd, before it serves the
// agent port, so that the agent's hello finds the engine, as on a remote
// host with Docker. The engine is Debian's as it comes (its bridge,
// its iptables rules; the kernel's modules for them from the initramfs,
// dockerModules); the services' containers are on the guest's network
// (--network host there), dialled at the guest's address, as the plan's
// docker row with network: host is on this machine's.

// cmdlineDocker on the kernel command line asks the guest's init for
// dockerd; its value is how many seconds init waits for it to answer.
const cmdlineDocker = "ctrperf.docker"

// dockerdLog is where the guest's dockerd writes, in the guest.
const dockerdLog = "/var/log/ctrperf-dockerd.log"

// dockerSocket is the guest's engine's socket (the agent's default).
const dockerSocket = "/run/docker.sock"

// dockerdArgv is the guest's dockerd: its defaults (the storage driver
// its own choice: overlay2 on the guest's ext4).
var dockerdArgv = []string{"/usr/sbin/dockerd", "--host", "unix://" + dockerSocket}

// dockerWanted says whether the kernel command line asks for dockerd,
// and how long init waits for it to answer.
func dockerWanted(cmdline string) (time.Duration, bool, error) {
	v := cmdlineValue(cmdline, cmdlineDocker)
	if v == "" {
		return 0, false, nil
	}
	s, err := strconv.Atoi(v)
	if err != nil || s < 1 {
		return 0, true, fmt.Errorf("%s=%s: expected the seconds to wait for dockerd", cmdlineDocker, v)
	}
	return time.Duration(s) * time.Second, true, nil
}

// startDockerd starts dockerd as init's child (init reaps it with the
// rest) and waits until it answers /_ping on its socket, at most wait;
// the error then says why, with the end of its log.
func startDockerd(env []string, wait time.Duration) error {
	if _, err := os.Stat(dockerdArgv[0]); err != nil {
		return fmt.Errorf("dockerd: %w (the guest's disk is not the debian-docker rootfs)", err)
	}
	// A container on the host network gets the guest's resolv.conf; the
	// guest resolves nothing, and says so.
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		_ = os.WriteFile("/etc/resolv.conf", []byte("# ctrperf's guest: no resolver\n"), 0o644)
	}
	log, err := os.OpenFile(dockerdLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("dockerd: its log: %w", err)
	}
	defer log.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	pid, err := syscall.ForkExec(dockerdArgv[0], dockerdArgv, &syscall.ProcAttr{
		Dir: "/", Env: env, Files: []uintptr{null.Fd(), log.Fd(), log.Fd()},
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return fmt.Errorf("start dockerd: %w", err)
	}
	exited := func() (bool, unix.WaitStatus) {
		var ws unix.WaitStatus
		p, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		return err == nil && p == pid, ws
	}
	if err := waitDocker(context.Background(), dockerSocket, wait, exited); err != nil {
		return fmt.Errorf("%w; the end of %s:\n%s", err, dockerdLog, consoleTail(dockerdLog, 12))
	}
	return nil
}

// waitDocker polls the engine's /_ping on socket until it answers, the
// engine's process exited (exited says so, with its status), or wait
// passed.
func waitDocker(ctx context.Context, socket string, wait time.Duration, exited func() (bool, unix.WaitStatus)) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(wait)
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/_ping: %s", resp.Status)
		}
		last = err
		if gone, ws := exited(); gone {
			return fmt.Errorf("dockerd exited (%s) before it answered", exitStatus(ws))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer on %s within %s: %w", socket, wait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func exitStatus(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "status " + strconv.Itoa(ws.ExitStatus())
}

// errNoGuestEngine is wrapped by Open when a guest with Docker boots but
// its engine does not answer its agent.
var errNoGuestEngine = errors.New("the guest's Docker engine does not answer")
