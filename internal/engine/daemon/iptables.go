package daemon

// Why this file exists: dockerd's bridge driver, when it starts with
// --iptables=true, flushes and deletes the DOCKER, DOCKER-ISOLATION-STAGE-1/2
// chains (libnetwork removeIPChains) before recreating them. Those chains are
// shared by every dockerd on the host, so starting a private engine would
// silently drop the port-forwarding rules of the user's engine and of other
// private engines. Start therefore snapshots the rules of the DOCKER* chains
// before the new dockerd starts and puts back, afterwards, every rule that
// vanished; the snapshot is a file, so that an interrupted start loses
// nothing either (rulesnapshot.go). Close removes the rules the private engine added (those naming
// its bridge or subnet), which dockerd leaves behind when it stops.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ipRule is one "-A CHAIN ..." line of iptables-save in a table.
type ipRule struct {
	Table string
	Chain string
	Args  []string // everything after -A CHAIN
}

func (r ipRule) String() string {
	return r.Table + ": -A " + r.Chain + " " + strings.Join(r.Args, " ")
}

var ipTables = []string{"nat", "filter"}

// parseIPTablesSave reads the rules of iptables-save output.
func parseIPTablesSave(r io.Reader) ([]ipRule, error) {
	var out []ipRule
	table := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, "-A "):
			f, err := splitQuoted(line)
			if err != nil {
				return nil, err
			}
			if len(f) < 2 || f[1] == "" || table == "" {
				// A rule needs a chain and a table ("*nat") before it:
				// restoring it would run iptables -t "" -A "".
				return nil, fmt.Errorf("malformed rule %q", line)
			}
			out = append(out, ipRule{Table: table, Chain: f[1], Args: f[2:]})
		}
	}
	return out, sc.Err()
}

// splitQuoted splits like iptables-save quotes: double quotes group words.
func splitQuoted(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && inQ && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQ, have = !inQ, true
		case (c == ' ' || c == '\t') && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQ {
		return nil, fmt.Errorf("unbalanced quote in %q", s)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

// dockerChainRules keeps the rules of chains dockerd flushes on start.
func dockerChainRules(rules []ipRule) []ipRule {
	var out []ipRule
	for _, r := range rules {
		if strings.HasPrefix(r.Chain, "DOCKER") {
			out = append(out, r)
		}
	}
	return out
}

// missingRules returns the rules of before that after lacks, in order.
func missingRules(before, after []ipRule) []ipRule {
	have := map[string]int{}
	for _, r := range after {
		have[r.String()]++
	}
	var out []ipRule
	for _, r := range before {
		if have[r.String()] > 0 {
			have[r.String()]--
			continue
		}
		out = append(out, r)
	}
	return out
}

// rulesOf returns the rules that name a private engine's bridge or subnet.
func rulesOf(rules []ipRule, bridge, subnet string) []ipRule {
	var out []ipRule
	for _, r := range rules {
		for _, a := range r.Args {
			if a == bridge || (subnet != "" && a == subnet) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// lockIPTables serialises the snapshot → dockerd start → restore window of
// every private engine on the host. Without it, engine B could snapshot
// before engine A's dockerd has made its rules, flush them on its own start,
// and never put them back. The unlock func must be called.
func lockIPTables(o Options) (func(), error) {
	if err := os.MkdirAll(o.enginesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", o.enginesDir(), err)
	}
	p := filepath.Join(o.enginesDir(), "iptables.lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open iptables lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// iptablesRunner runs iptables; a fake replaces it in tests.
type iptablesRunner interface {
	Save(ctx context.Context, table string) ([]ipRule, error)
	Run(ctx context.Context, args ...string) error
}

type execIPTables struct{}

func (execIPTables) Save(ctx context.Context, table string) ([]ipRule, error) {
	out, err := exec.CommandContext(ctx, "iptables-save", "-t", table).Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save -t %s: %w", table, err)
	}
	rules, err := parseIPTablesSave(strings.NewReader(string(out)))
	if err != nil {
		return nil, fmt.Errorf("parse iptables-save -t %s: %w", table, err)
	}
	return rules, nil
}

func (execIPTables) Run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func saveAll(ctx context.Context, ipt iptablesRunner) ([]ipRule, error) {
	var all []ipRule
	for _, t := range ipTables {
		r, err := ipt.Save(ctx, t)
		if err != nil {
			return nil, err
		}
		all = append(all, r...)
	}
	return all, nil
}

// restoreRules puts back the DOCKER* rules of before that are now missing.
// They go to the top of their chain (in their original order) because the
// new dockerd has already appended its catch-all RETURN rules at the end.
//
// A rule whose interface is gone is not put back: the other engine removed
// that network while this one started (the flock only orders private
// engines, not the user's), and its rules must stay removed, or they would
// outlive their bridge for good.
func restoreRules(ctx context.Context, ipt iptablesRunner, before []ipRule, linkExists func(string) bool) ([]ipRule, error) {
	after, err := saveAll(ctx, ipt)
	if err != nil {
		return nil, err
	}
	var missing []ipRule
	// The jumps into DOCKER from the built-in chains too: a dockerd that
	// starts deletes both forms of its OUTPUT hook before adding its own.
	shared := func(rs []ipRule) []ipRule { return append(dockerChainRules(rs), jumpRules(rs)...) }
	for _, r := range missingRules(shared(before), shared(after)) {
		if ifacesExist(r, linkExists) {
			missing = append(missing, r)
		}
	}
	var errs []error
	for i := len(missing) - 1; i >= 0; i-- {
		r := missing[i]
		args := append([]string{"-w", "-t", r.Table, "-I", r.Chain, "1"}, r.Args...)
		if err := ipt.Run(ctx, args...); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return missing, fmt.Errorf("restore %d iptables rules of other engines: %v", len(errs), errs)
	}
	return missing, nil
}

// deleteRulesOf removes every rule naming the bridge or subnet.
func deleteRulesOf(ctx context.Context, ipt iptablesRunner, bridge, subnet string) (int, error) {
	all, err := saveAll(ctx, ipt)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, r := range rulesOf(all, bridge, subnet) {
		args := append([]string{"-w", "-t", r.Table, "-D", r.Chain}, r.Args...)
		if err := ipt.Run(ctx, args...); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("delete iptables rules of bridge %s: %v", bridge, errs)
	}
	return n, nil
}

// ifacesExist says whether every interface a rule names with -i or -o
// (wildcards ending in + aside) exists.
func ifacesExist(r ipRule, linkExists func(string) bool) bool {
	for i := 0; i+1 < len(r.Args); i++ {
		if a := r.Args[i]; a == "-i" || a == "-o" {
			name := r.Args[i+1]
			if !strings.HasSuffix(name, "+") && !linkExists(name) {
				return false
			}
		}
	}
	return true
}

// jumpRules are the rules of the built-in chains that jump to a DOCKER*
// chain (dockerd's hooks into PREROUTING and OUTPUT).
func jumpRules(rules []ipRule) []ipRule {
	var out []ipRule
	for _, r := range rules {
		if strings.HasPrefix(r.Chain, "DOCKER") {
			continue
		}
		for i := 0; i+1 < len(r.Args); i++ {
			if r.Args[i] == "-j" && strings.HasPrefix(r.Args[i+1], "DOCKER") {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// addedJumps are the jumps into DOCKER* chains that exist now and did not
// before: the ones the engine just started made.
func addedJumps(ctx context.Context, ipt iptablesRunner, before []ipRule) ([]ipRule, error) {
	after, err := saveAll(ctx, ipt)
	if err != nil {
		return nil, err
	}
	return missingRules(jumpRules(after), jumpRules(before)), nil
}

// deleteJumps removes jumps an engine added, unless another live engine
// still needs them (wantsJump); a rule already gone is not an error.
func deleteJumps(ctx context.Context, ipt iptablesRunner, jumps []ipRule) (int, error) {
	now, err := saveAll(ctx, ipt)
	if err != nil {
		return 0, err
	}
	have := map[string]bool{}
	for _, r := range now {
		have[r.String()] = true
	}
	n := 0
	var errs []error
	for _, r := range jumps {
		if !have[r.String()] {
			continue
		}
		args := append([]string{"-w", "-t", r.Table, "-D", r.Chain}, r.Args...)
		if err := ipt.Run(ctx, args...); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("delete iptables jumps: %v", errs)
	}
	return n, nil
}
