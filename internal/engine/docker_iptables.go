package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"ctrperf/internal/kernel"
)

// Why ctrperf touches iptables at all: every dockerd on a host shares the
// nat table. A dockerd started with --userland-proxy=false (a private engine
// of ctrperf's, or anyone's) installs "-A OUTPUT -m addrtype --dst-type
// LOCAL -j DOCKER" without the "! -d 127.0.0.0/8" that a proxy-on engine
// uses. While it runs, host traffic to 127.0.0.1:<published port> of a
// proxy-on engine is DNATed instead of reaching docker-proxy, and without
// that engine's hairpin masquerade it is dropped: "published" would hang or,
// worse, silently measure NAT instead of the proxy. A RETURN rule for exactly
// the run's published ports, first in nat OUTPUT, keeps that traffic on
// docker-proxy, which is what the "published" configuration means.

// loopbackComment marks the rules of a run.
func loopbackComment(runID string) string { return "ctrperf.run=" + runID }

// loopbackRule is the rule (without -t/-I/-D) that keeps host traffic to
// 127.0.0.1:port away from Docker's DNAT.
func loopbackRule(runID string, port int) []string {
	return []string{"-d", "127.0.0.1/32", "-p", "tcp", "-m", "tcp", "--dport", strconv.Itoa(port),
		"-m", "comment", "--comment", loopbackComment(runID), "-j", "RETURN"}
}

// iptablesRunner runs iptables with args and returns its stdout.
type iptablesRunner func(ctx context.Context, args ...string) ([]byte, error)

// execIPTables runs the iptables binary, waiting for the xtables lock
// (dockerd holds it while it edits rules).
func execIPTables(ctx context.Context, args ...string) ([]byte, error) {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return nil, fmt.Errorf("iptables: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"-w", "5"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

type loopbackRuleRef struct {
	RunID string
	Port  int
}

var loopbackRuleRe = regexp.MustCompile(`^-A OUTPUT -d 127\.0\.0\.1/32 -p tcp -m tcp --dport ([0-9]+) -m comment --comment "?ctrperf\.run=([A-Za-z0-9][A-Za-z0-9_.-]*)"? -j RETURN$`)

// parseLoopbackRules finds ctrperf's rules in `iptables -t nat -S OUTPUT`
// output; runID "" matches every run.
func parseLoopbackRules(r io.Reader, runID string) []loopbackRuleRef {
	var out []loopbackRuleRef
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := loopbackRuleRe.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil || (runID != "" && m[2] != runID) {
			continue
		}
		p, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		out = append(out, loopbackRuleRef{RunID: m[2], Port: p})
	}
	return out
}

// addLoopbackRule puts the run's rule for port first in nat OUTPUT.
func addLoopbackRule(ctx context.Context, run iptablesRunner, runID string, port int) error {
	_, err := run(ctx, append([]string{"-t", "nat", "-I", "OUTPUT", "1"}, loopbackRule(runID, port)...)...)
	return err
}

// removeLoopbackRules deletes the loopback rules of a run (runID "": of
// every run). No iptables binary means no rule was ever added.
func removeLoopbackRules(ctx context.Context, run iptablesRunner, runID string, dry bool, own *Ownership) ([]string, error) {
	out, err := listRules(ctx, run, "nat", "OUTPUT")
	if out == nil || err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, r := range parseLoopbackRules(bytes.NewReader(out), runID) {
		if own.Keep(fmt.Sprintf("iptables rule nat OUTPUT 127.0.0.1:%d of run %s", r.Port, r.RunID), r.RunID) {
			continue
		}
		if !dry {
			if _, err := run(ctx, append([]string{"-t", "nat", "-D", "OUTPUT"}, loopbackRule(r.RunID, r.Port)...)...); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed = append(removed, fmt.Sprintf("iptables rule nat OUTPUT 127.0.0.1:%d of run %s", r.Port, r.RunID))
	}
	return removed, errors.Join(errs...)
}

// listRules is `iptables -t table -S [chain]`; nil and no error when there
// is no iptables binary (nothing of ctrperf's can be in a table then).
func listRules(ctx context.Context, run iptablesRunner, table, chain string) ([]byte, error) {
	args := []string{"-t", table, "-S"}
	if chain != "" {
		args = append(args, chain)
	}
	out, err := run(ctx, args...)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s %s rules: %w", table, chain, err)
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// dockerProxyServes reports whether a docker-proxy process serves host port
// port (read from <proc>/*/cmdline).
func dockerProxyServes(fs kernel.FS, port int) bool {
	pids, err := fs.PIDs()
	if err != nil {
		return false
	}
	want := strconv.Itoa(port)
	for _, pid := range pids {
		args, err := fs.Cmdline(pid)
		if err != nil || filepath.Base(args[0]) != "docker-proxy" {
			continue
		}
		for i, a := range args {
			if a == "-host-port" && i+1 < len(args) && args[i+1] == want {
				return true
			}
		}
	}
	return false
}
