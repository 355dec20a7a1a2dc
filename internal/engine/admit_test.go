package engine

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/owner"
)

// fakeFilter keeps a filter table as `iptables -S` prints it and runs the
// few commands the admit chain uses.
type fakeFilter struct {
	chains map[string][]string // chain -> rules (args after -A CHAIN)
	order  []string
	calls  [][]string
	failOn string // an argument that makes a call fail
}

func newFakeFilter() *fakeFilter {
	f := &fakeFilter{chains: map[string][]string{}}
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		f.chains[c] = nil
		f.order = append(f.order, c)
	}
	return f
}

func (f *fakeFilter) run(_ context.Context, args ...string) ([]byte, error) {
	f.calls = append(f.calls, args)
	if f.failOn != "" && slices.Contains(args, f.failOn) {
		return nil, errors.New("iptables: refused")
	}
	if len(args) < 3 || args[0] != "-t" || args[1] != "filter" {
		return nil, errors.New("fake: unexpected " + strings.Join(args, " "))
	}
	op, rest := args[2], args[3:]
	switch op {
	case "-N":
		if _, ok := f.chains[rest[0]]; ok {
			return nil, errors.New("iptables: Chain already exists")
		}
		f.chains[rest[0]] = nil
		f.order = append(f.order, rest[0])
	case "-A":
		f.chains[rest[0]] = append(f.chains[rest[0]], strings.Join(rest[1:], " "))
	case "-I":
		rule := strings.Join(rest[2:], " ")
		f.chains[rest[0]] = append([]string{rule}, f.chains[rest[0]]...)
	case "-D":
		rule := strings.Join(rest[1:], " ")
		i := slices.Index(f.chains[rest[0]], rule)
		if i < 0 {
			return nil, errors.New("iptables: Bad rule")
		}
		f.chains[rest[0]] = slices.Delete(f.chains[rest[0]], i, i+1)
	case "-F":
		f.chains[rest[0]] = nil
	case "-X":
		for _, c := range f.order {
			for _, r := range f.chains[c] {
				if strings.HasSuffix(r, "-j "+rest[0]) {
					return nil, errors.New("iptables: Too many links")
				}
			}
		}
		delete(f.chains, rest[0])
		f.order = slices.DeleteFunc(f.order, func(c string) bool { return c == rest[0] })
	case "-S":
		var b strings.Builder
		for _, c := range f.order {
			if len(rest) > 0 && rest[0] != c {
				continue
			}
			if !slices.Contains([]string{"INPUT", "FORWARD", "OUTPUT"}, c) {
				b.WriteString("-N " + c + "\n")
			}
			for i, r := range f.chains[c] {
				line := "-A " + c + " " + quoteComment(r)
				if slices.Contains(rest, "-v") {
					line += " -c " + strconv.Itoa(10*(i+1)) + " 999"
				}
				b.WriteString(line + "\n")
			}
		}
		return []byte(b.String()), nil
	}
	return nil, nil
}

// quoteComment prints a comment with a space the way iptables does.
func quoteComment(r string) string {
	i := strings.Index(r, "--comment ")
	if i < 0 {
		return r
	}
	rest := r[i+len("--comment "):]
	j := strings.Index(rest, " -j ")
	return r[:i] + `--comment "` + rest[:j] + `"` + rest[j:]
}

var (
	loadAddr = netip.MustParseAddr("198.19.200.3")
	sutDests = []admitDest{{Addr: netip.MustParseAddrPort("198.19.200.2:40001")}, {Addr: netip.MustParseAddrPort("198.19.202.2:8080"), Accept: true}}
)

func TestAdmitChainLetsOnlyTheLoadHostIn(t *testing.T) {
	f := newFakeFilter()
	if err := installAdmit(context.Background(), f.run, "lab-abc-001", loadAddr, sutDests); err != nil {
		t.Fatal(err)
	}
	chain := admitChain("lab-abc-001")
	for _, hook := range admitHooks {
		if len(f.chains[hook]) == 0 || f.chains[hook][0] != "-j "+chain {
			t.Errorf("%s does not jump to %s first: %v", hook, chain, f.chains[hook])
		}
	}
	rules := f.chains[chain]
	if len(rules) != 4 {
		t.Fatalf("rules %v, want an admit and a refuse per endpoint", rules)
	}
	for i, want := range []struct{ has, verdict string }{
		{"-s 198.19.200.3/32 -p tcp -m conntrack --ctorigdst 198.19.200.2/32 --ctorigdstport 40001 --ctdir ORIGINAL", "-j RETURN"},
		{"-p tcp -m conntrack --ctorigdst 198.19.200.2/32 --ctorigdstport 40001 --ctdir ORIGINAL", "-j REJECT --reject-with tcp-reset"},
		{"-s 198.19.200.3/32 -p tcp -m conntrack --ctorigdst 198.19.202.2/32 --ctorigdstport 8080", "-j ACCEPT"},
		{"--ctorigdst 198.19.202.2/32 --ctorigdstport 8080 --ctdir ORIGINAL", "-j REJECT"},
	} {
		if !strings.Contains(rules[i], want.has) || !strings.Contains(rules[i], want.verdict) || !strings.Contains(rules[i], "ctrperf.run=lab-abc-001") {
			t.Errorf("rule %d = %q, want %q … %q with the run's comment", i, rules[i], want.has, want.verdict)
		}
	}
	if i := strings.Index(rules[1], "-s "); i >= 0 {
		t.Errorf("the refuse rule matches a source: %q", rules[1])
	}

	c, err := readAdmitCounts(context.Background(), f.run, "lab-abc-001")
	if err != nil || c.Chain != chain || c.AdmittedPackets != 10+30 || c.RefusedPackets != 20+40 {
		t.Errorf("counts %+v, %v; want admitted 40, refused 60", c, err)
	}

	removed, err := removeAdmit(context.Background(), f.run, "lab-abc-001", false, nil)
	if err != nil || len(removed) != 1 {
		t.Fatalf("remove: %v, %v", removed, err)
	}
	if _, ok := f.chains[chain]; ok {
		t.Error("chain still there")
	}
	for _, hook := range admitHooks {
		if len(f.chains[hook]) != 0 {
			t.Errorf("%s keeps %v", hook, f.chains[hook])
		}
	}
}

func TestAdmitInstallFailureLeavesNothing(t *testing.T) {
	f := newFakeFilter()
	f.failOn = "FORWARD" // the second jump
	err := installAdmit(context.Background(), f.run, "lab-abc-002", loadAddr, sutDests)
	if err == nil || !strings.Contains(err.Error(), "198.19.200.3") {
		t.Fatalf("install = %v, want an error naming the load host", err)
	}
	f.failOn = ""
	if _, ok := f.chains[admitChain("lab-abc-002")]; ok || len(f.chains["INPUT"]) != 0 {
		t.Errorf("left behind: %v", f.chains)
	}
}

func TestCleanKeepsALiveRunsChainAndTakesOthers(t *testing.T) {
	f := newFakeFilter()
	for _, id := range []string{"lab-abc-001", "lab-old-001"} {
		if err := installAdmit(context.Background(), f.run, id, loadAddr, sutDests[:1]); err != nil {
			t.Fatal(err)
		}
	}
	// A chain a killed install left empty, and a chain of someone else's.
	f.chains[AdmitPrefix+"0000000"] = nil
	f.order = append(f.order, AdmitPrefix+"0000000", "USER-CHAIN")
	f.chains["USER-CHAIN"] = []string{"-j RETURN"}

	own := NewOwnership(ownersHolding("lab-abc-001"), false)
	removed, err := removeAdmit(context.Background(), f.run, "", false, own)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if len(removed) != 2 || !strings.Contains(removed[0], "(empty)") || !strings.Contains(removed[1], "lab-old-001") {
		t.Errorf("removed %v, want the empty chain and lab-old-001's", removed)
	}
	if _, ok := f.chains[admitChain("lab-abc-001")]; !ok {
		t.Error("the live run's chain was removed")
	}
	if _, ok := f.chains["USER-CHAIN"]; !ok {
		t.Error("a chain that is not ctrperf's was removed")
	}
}

func TestParseAdmitCountsOfRealOutput(t *testing.T) {
	out := `-N CTRPERF-ADMIT-a2cf8f8
-A CTRPERF-ADMIT-a2cf8f8 -s 198.19.200.3/32 -p tcp -m conntrack --ctorigdst 198.19.200.2/32 --ctorigdstport 36067 --ctdir ORIGINAL -m comment --comment "ctrperf.run=lab-smoke-x-001 admit" -c 838 61234 -j RETURN
-A CTRPERF-ADMIT-a2cf8f8 -p tcp -m conntrack --ctorigdst 198.19.200.2/32 --ctorigdstport 36067 --ctdir ORIGINAL -m comment --comment "ctrperf.run=lab-smoke-x-001 refuse" -c 3 180 -j REJECT --reject-with tcp-reset
`
	c, found := parseAdmitCounts(strings.NewReader(out), "lab-smoke-x-001")
	if !found || c.AdmittedPackets != 838 || c.RefusedPackets != 3 {
		t.Errorf("counts %+v (found %v), want 838 admitted, 3 refused", c, found)
	}
	if _, found := parseAdmitCounts(strings.NewReader(out), "another-run"); found {
		t.Error("another run's rules counted")
	}
}

// ownersHolding is one live bench session's record holding runIDs.
func ownersHolding(runIDs ...string) owner.Owners {
	return owner.Owners{{Record: owner.Record{Kind: owner.KindBench, Session: "lab-abc", PID: 10, Command: []string{"ctrperf", "bench", "run"},
		Started: time.Unix(0, 0), Objects: runIDs}, Live: true, Reason: "its lock is held"}}
}

// TestAdmitPublishedForAnEngineThatDoesNot: an engine whose rules do not
// accept forwarded connections to published ports (rootful podman beside
// Docker's FORWARD policy DROP) gets them accepted: the load host's to its
// published endpoints, and the client namespace's of published-external
// to whatever it dials through DNAT, in a chain of the run that teardown
// removes.
func TestAdmitPublishedForAnEngineThatDoesNot(t *testing.T) {
	tg := &Target{Network: NetworkPublished, Endpoints: []Endpoint{{Service: "app", Port: 8080, Addr: "198.19.200.2:40001"}}}
	for _, tc := range []struct {
		desc   string
		accept bool
		want   bool
	}{
		{"Docker: its own rules accept a published port, the chain returns to them", false, false},
		{"podman: the chain accepts", true, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := admitDests(tg, tc.accept)
			if err != nil || len(d) != 1 || d[0].Accept != tc.want {
				t.Errorf("admitDests = %+v, %v; want Accept %v", d, err, tc.want)
			}
		})
	}
	f := newFakeFilter()
	peer := netip.MustParseAddr("198.18.0.2")
	if err := admitNamespace(context.Background(), f.run, "net-abc-003", peer); err != nil {
		t.Fatal(err)
	}
	chain := admitChain("net-abc-003")
	if r := f.chains[chain]; len(r) != 1 || !strings.Contains(r[0], "-s 198.18.0.2/32 -m conntrack --ctstate DNAT --ctdir ORIGINAL") ||
		!strings.Contains(r[0], "ctrperf.run=net-abc-003") || !strings.HasSuffix(r[0], "-j ACCEPT") {
		t.Errorf("chain %s = %v, want one rule accepting the namespace's DNATed connections", chain, r)
	}
	if removed, err := removeAdmit(context.Background(), f.run, "net-abc-003", false, nil); err != nil || len(removed) != 1 || len(f.chains["FORWARD"]) != 0 {
		t.Errorf("remove: %v, %v; FORWARD %v", removed, err, f.chains["FORWARD"])
	}
}
