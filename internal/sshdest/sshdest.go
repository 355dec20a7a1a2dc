// Package sshdest tells what ssh will really use for a plan's host: the
// HostName, User, Port, IdentityFile and ProxyJump that a destination
// ("lab-sut", user@addr, ssh://user@addr:port) comes to after the ssh
// config, as `ssh -G -F CONFIG DEST` prints them. ctrperf never reads
// ~/.ssh/config itself: OpenSSH's own answer is the only one that matches
// what the connection will do (Match blocks, Include, defaults).
//
// Parse is a pure function of ssh -G's output (tested on fixtures); Resolve
// is the one exec around it. Reaching the host is internal/remote's.
package sshdest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// Resolved is what ssh will use to reach a destination.
type Resolved struct {
	HostName string
	User     string
	Port     int
	// IdentityFiles are the keys ssh offers, in order (ssh's defaults
	// when the config names none).
	IdentityFiles []string
	// ProxyJump is the jump host(s), "" for a direct connection;
	// ProxyCommand the command ssh connects through, "" for none.
	ProxyJump    string
	ProxyCommand string
	// StrictHostKeyChecking is the config's setting (yes, no, ask,
	// accept-new); UserKnownHostsFiles are where host keys are looked up.
	StrictHostKeyChecking string
	UserKnownHostsFiles   []string
}

// Addr is host:port as ssh dials it ("198.19.200.2:22", "[fd00::2]:22").
func (r Resolved) Addr() string { return net.JoinHostPort(r.HostName, strconv.Itoa(r.Port)) }

// Dest is user@host:port, what records name as the host's destination.
func (r Resolved) Dest() string {
	if r.User == "" {
		return r.Addr()
	}
	return r.User + "@" + r.Addr()
}

// String describes the resolution for bench validate: the destination,
// the jump host and the first key.
func (r Resolved) String() string {
	s := r.Dest()
	if r.ProxyJump != "" {
		s += " via " + r.ProxyJump
	}
	if r.ProxyCommand != "" {
		s += " via ProxyCommand"
	}
	if len(r.IdentityFiles) > 0 {
		s += ", key " + r.IdentityFiles[0]
		if n := len(r.IdentityFiles) - 1; n > 0 {
			s += fmt.Sprintf(" (+%d)", n)
		}
	}
	return s
}

// Parse reads the output of ssh -G: one "keyword value" a line, keywords
// in lower case, multi-valued ones (identityfile) repeated.
func Parse(out []byte) (Resolved, error) {
	var r Resolved
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		val = strings.TrimSpace(val)
		switch strings.ToLower(key) {
		case "hostname":
			r.HostName = val
		case "user":
			r.User = val
		case "port":
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 || p > 65535 {
				return Resolved{}, fmt.Errorf("ssh -G: port %q is not a port", val)
			}
			r.Port = p
		case "identityfile":
			r.IdentityFiles = append(r.IdentityFiles, val)
		case "proxyjump":
			if val != "none" {
				r.ProxyJump = val
			}
		case "proxycommand":
			if val != "none" {
				r.ProxyCommand = val
			}
		case "stricthostkeychecking":
			r.StrictHostKeyChecking = val
		case "userknownhostsfile":
			r.UserKnownHostsFiles = strings.Fields(val)
		}
	}
	if err := sc.Err(); err != nil {
		return Resolved{}, fmt.Errorf("ssh -G: %w", err)
	}
	if r.HostName == "" {
		return Resolved{}, errors.New("ssh -G printed no hostname")
	}
	if r.Port == 0 {
		r.Port = 22
	}
	return r, nil
}

// Args are the arguments of ssh -G for d with the config file (none: ssh's
// own, ~/.ssh/config); the destination comes after "--".
func Args(config string, d plan.Dest) []string {
	args := []string{"-G"}
	if config != "" {
		args = append(args, "-F", ExpandHome(config))
	}
	return append(args, d.SSHArgs()...)
}

// ExpandHome turns a leading "~/" into the user's home directory (ssh -F
// takes the path as it is).
func ExpandHome(path string) string {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~"))
}

// Resolve asks ssh what it will use for d with the config file. A config
// that does not exist or that ssh refuses is an error in ssh's words.
func Resolve(ctx context.Context, config string, d plan.Dest) (Resolved, error) {
	if d.Local() {
		return Resolved{}, errors.New("this machine has no SSH destination")
	}
	if config != "" {
		if _, err := os.Stat(ExpandHome(config)); err != nil {
			return Resolved{}, fmt.Errorf("ssh config: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", Args(config, d)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return Resolved{}, fmt.Errorf("ssh -G %s: %s", d.Raw, msg)
	}
	return Parse(out)
}

// RunHost is the record's name for a host: the plan's name for it and, when
// it was resolved, ssh's destination.
func RunHost(d plan.Dest, r *Resolved) *results.RunHost {
	if d.Local() {
		return nil
	}
	h := &results.RunHost{Name: d.Raw}
	if r != nil {
		h.Dest = r.Dest()
	}
	return h
}
