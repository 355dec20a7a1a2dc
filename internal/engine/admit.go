package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/lifecycle"
)

// Reach is a client on another machine: the load host of a two-host plan.
// With it the front service is served where that client's packets arrive
// (Addr), the way a client elsewhere dials it — the bare-metal process and
// --net=host listen there, published ports are bound there (Docker's DNAT
// from outside, docker-proxy is never on that path), the container's own
// address stays as it is (the load host routes to it through this host) —
// and only From gets in: the run's endpoints get an iptables chain of
// ctrperf's own (admitChain) that admits From and rejects every other
// source, counting both.
type Reach struct {
	// Addr is this host's address on which From's packets arrive (`ip route
	// get FROM` here), never a name.
	Addr netip.Addr `json:"addr"`
	// From is the load host's address as this host sees it.
	From netip.Addr `json:"from"`
	// Sole: From's link is the only way into this host (a VM guest whose
	// one network is ctrperf's tap to the load host), so no admit chain
	// is installed: nothing else could get in, and a guest has no
	// iptables.
	Sole bool `json:"sole,omitempty"`
}

// Valid says whether both addresses are set.
func (r *Reach) Valid() bool { return r != nil && r.Addr.IsValid() && r.From.IsValid() }

// AdmitPrefix starts the name of a run's admit chain (filter table).
const AdmitPrefix = "CTRPERF-ADMIT-"

// admitChain is the name of run's chain: AdmitPrefix and the run's short
// id (iptables chain names are at most 28 characters; the run id itself is
// in every rule's comment, which is what clean goes by).
func admitChain(runID string) string { return AdmitPrefix + shortID(runID) }

// admitHooks are the built-in chains that jump to an admit chain: INPUT
// for what this host serves itself (a bare-metal process, --net=host),
// FORWARD for what it forwards to a container (a published port after
// Docker's DNAT, a container's own address).
var admitHooks = []string{"INPUT", "FORWARD"}

// admitDest is one endpoint as the load host dials it.
type admitDest struct {
	Addr netip.AddrPort
	// Forwarded endpoints (a container's own address) are accepted here:
	// Docker's FORWARD admits only published ports, and opening exactly the
	// load host's path to exactly this port is what one does by hand. The
	// others return to the host's own rules, so the path is Docker's.
	Accept bool
}

// admitComment marks a rule of run with its verdict.
func admitComment(runID, verdict string) string { return "ctrperf.run=" + runID + " " + verdict }

// admitRules are the rules of run's chain, in order (without -A CHAIN):
// for each destination, the load host's packets of the original direction
// (the replies are the host's own business) pass, and everyone else's new
// connections are reset.
func admitRules(runID string, from netip.Addr, dests []admitDest) [][]string {
	var rules [][]string
	for _, d := range dests {
		match := []string{"-p", "tcp", "-m", "conntrack", "--ctorigdst", d.Addr.Addr().String() + "/32",
			"--ctorigdstport", strconv.Itoa(int(d.Addr.Port())), "--ctdir", "ORIGINAL"}
		verdict := "RETURN"
		if d.Accept {
			verdict = "ACCEPT"
		}
		rules = append(rules,
			append(append([]string{"-s", from.String() + "/32"}, match...), "-m", "comment", "--comment", admitComment(runID, "admit"), "-j", verdict),
			append(append([]string{}, match...), "-m", "comment", "--comment", admitComment(runID, "refuse"), "-j", "REJECT", "--reject-with", "tcp-reset"))
	}
	return rules
}

// installAdmit makes run's chain with its rules, then the jumps to it, first
// in INPUT and FORWARD (ahead of Docker's, which only accept or return).
// A failure removes what it made.
func installAdmit(ctx context.Context, run iptablesRunner, runID string, from netip.Addr, dests []admitDest) (err error) {
	if len(dests) == 0 {
		return nil
	}
	return installChain(ctx, run, runID, from, admitRules(runID, from, dests))
}

// admitNATRule accepts the forwarded connections of client from to any
// address this host DNATs (the run's published ports, as it dials them).
func admitNATRule(runID string, from netip.Addr) []string {
	return []string{"-s", from.String() + "/32", "-m", "conntrack", "--ctstate", "DNAT", "--ctdir", "ORIGINAL",
		"-m", "comment", "--comment", admitComment(runID, "admit"), "-j", "ACCEPT"}
}

// admitNamespace lets the client namespace of a published-external run
// (from) through FORWARD to the published ports, for an engine whose own
// rules do not (WithAcceptForwarded); made before the services, whose
// ready checks dial from there.
func admitNamespace(ctx context.Context, run iptablesRunner, runID string, from netip.Addr) error {
	return installChain(ctx, run, runID, from, [][]string{admitNATRule(runID, from)})
}

// installChain makes run's chain with rules, then the jumps to it.
func installChain(ctx context.Context, run iptablesRunner, runID string, from netip.Addr, rules [][]string) (err error) {
	chain := admitChain(runID)
	ctx, cancel := lifecycle.Detached(ctx, 30*time.Second)
	defer cancel()
	if _, err := run(ctx, "-t", "filter", "-N", chain); err != nil {
		return fmt.Errorf("admit only the load host %s: %w", from, err)
	}
	defer func() {
		if err != nil {
			if _, cerr := removeAdmit(ctx, run, runID, false, nil); cerr != nil {
				err = fmt.Errorf("%w (and removing chain %s: %v)", err, chain, cerr)
			}
		}
	}()
	for _, r := range rules {
		if _, err := run(ctx, append([]string{"-t", "filter", "-A", chain}, r...)...); err != nil {
			return fmt.Errorf("admit only the load host %s: %w", from, err)
		}
	}
	for _, hook := range admitHooks {
		if _, err := run(ctx, "-t", "filter", "-I", hook, "1", "-j", chain); err != nil {
			return fmt.Errorf("admit only the load host %s: %w", from, err)
		}
	}
	return nil
}

// AdmitCounts are what a run's chain let in and turned away.
type AdmitCounts struct {
	// Chain is the chain's name on the host.
	Chain string `json:"chain"`
	// AdmittedPackets are the load host's packets to the endpoints.
	AdmittedPackets uint64 `json:"admitted_packets"`
	// RefusedPackets are other sources' packets to them, each answered
	// with a TCP reset.
	RefusedPackets uint64 `json:"refused_packets"`
}

// admitCountRe reads a rule with its counters from `iptables -S CHAIN -v`
// ("-A CHAIN ... -c PACKETS BYTES").
var admitCountRe = regexp.MustCompile(`--comment "?ctrperf\.run=([A-Za-z0-9][A-Za-z0-9_.-]*) (admit|refuse)"?.* -c ([0-9]+) ([0-9]+)`)

// parseAdmitCounts sums the counters of run's rules in `iptables -S CHAIN
// -v` output.
func parseAdmitCounts(r io.Reader, runID string) (c AdmitCounts, found bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := admitCountRe.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != runID {
			continue
		}
		n, err := strconv.ParseUint(m[3], 10, 64)
		if err != nil {
			continue
		}
		found = true
		if m[2] == "admit" {
			c.AdmittedPackets += n
		} else {
			c.RefusedPackets += n
		}
	}
	return c, found
}

// ReadAdmitCounts reads the counters of run's chain on this host.
func ReadAdmitCounts(ctx context.Context, runID string) (AdmitCounts, error) {
	return readAdmitCounts(ctx, execIPTables, runID)
}

func readAdmitCounts(ctx context.Context, run iptablesRunner, runID string) (AdmitCounts, error) {
	chain := admitChain(runID)
	out, err := run(ctx, "-t", "filter", "-S", chain, "-v")
	if err != nil {
		return AdmitCounts{}, fmt.Errorf("counters of chain %s: %w", chain, err)
	}
	c, found := parseAdmitCounts(bytes.NewReader(out), runID)
	if !found {
		return AdmitCounts{}, fmt.Errorf("chain %s holds no rule of run %s", chain, runID)
	}
	c.Chain = chain
	return c, nil
}

// admitChainRe finds admit chains in `iptables -S` output.
var admitChainRe = regexp.MustCompile(`^-N (` + regexp.QuoteMeta(AdmitPrefix) + `[0-9a-f]{7})$`)

// admitRunRe finds the run of a rule of an admit chain.
var admitRunRe = regexp.MustCompile(`^-A (` + regexp.QuoteMeta(AdmitPrefix) + `[0-9a-f]{7}) .*--comment "?ctrperf\.run=([A-Za-z0-9][A-Za-z0-9_.-]*) (?:admit|refuse)`)

// admitChains lists the admit chains of `iptables -t filter -S` output
// with the run each belongs to ("" for a chain that holds no rule: one
// whose install died between making it and filling it).
func admitChains(r io.Reader) map[string]string {
	chains := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := admitChainRe.FindStringSubmatch(line); m != nil {
			if _, ok := chains[m[1]]; !ok {
				chains[m[1]] = ""
			}
		} else if m := admitRunRe.FindStringSubmatch(line); m != nil {
			chains[m[1]] = m[2]
		}
	}
	return chains
}

// removeAdmit removes the admit chain of run (runID "": of every run not
// kept by own) with the jumps to it. No iptables binary means no chain.
func removeAdmit(ctx context.Context, run iptablesRunner, runID string, dry bool, own *Ownership) ([]string, error) {
	out, err := listRules(ctx, run, "filter", "")
	if out == nil || err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for chain, owner := range admitChains(bytes.NewReader(out)) {
		if runID != "" && chain != admitChain(runID) {
			continue
		}
		what := fmt.Sprintf("iptables chain filter %s of run %s", chain, owner)
		if owner == "" {
			what = fmt.Sprintf("iptables chain filter %s (empty)", chain)
		} else if own.Keep(what, owner) {
			continue
		}
		if !dry {
			if err := dropChain(ctx, run, chain); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed = append(removed, what)
	}
	return removed, errors.Join(errs...)
}

// dropChain removes every jump to chain, then the chain.
func dropChain(ctx context.Context, run iptablesRunner, chain string) error {
	for _, hook := range admitHooks {
		for range 16 { // one jump each, unless something duplicated it
			if _, err := run(ctx, "-t", "filter", "-D", hook, "-j", chain); err != nil {
				break
			}
		}
	}
	if _, err := run(ctx, "-t", "filter", "-F", chain); err != nil {
		return fmt.Errorf("flush chain %s: %w", chain, err)
	}
	if _, err := run(ctx, "-t", "filter", "-X", chain); err != nil {
		return fmt.Errorf("delete chain %s: %w", chain, err)
	}
	return nil
}

// admitDests are a target's endpoints as the load host dials them, for
// its admit chain. acceptPublished: the engine's own rules do not accept
// a forwarded connection to a published port either (see
// WithAcceptForwarded), so the chain does.
func admitDests(t *Target, acceptPublished bool) ([]admitDest, error) {
	var out []admitDest
	for _, ep := range t.Endpoints {
		ap, err := netip.ParseAddrPort(ep.Addr)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s of %s: %w", ep.Addr, ep.Service, err)
		}
		published := t.Network == NetworkPublished || t.Network == NetworkPublishedExternal
		out = append(out, admitDest{Addr: ap, Accept: t.Network == NetworkContainerIP || published && acceptPublished})
	}
	return out, nil
}

// admitReach lets only the load host of spec.Reach in to t's endpoints
// (nothing without Reach). It runs once the services answer: their ready
// checks dial from this host.
func admitReach(ctx context.Context, run iptablesRunner, spec DeploySpec, t *Target) error {
	return admitClients(ctx, run, spec, t, false)
}

// admitClients is admitReach of an engine whose rules may not accept
// forwarded connections to published ports (acceptPublished): the chain
// accepts the load host's.
func admitClients(ctx context.Context, run iptablesRunner, spec DeploySpec, t *Target, acceptPublished bool) error {
	if !spec.Reach.Valid() || spec.Reach.Sole {
		return nil
	}
	dests, err := admitDests(t, acceptPublished)
	if err != nil {
		return err
	}
	return installAdmit(ctx, run, spec.RunID, spec.Reach.From, dests)
}
