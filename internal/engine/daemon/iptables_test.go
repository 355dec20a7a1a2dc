package daemon

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func fixtureRules(t *testing.T) []ipRule {
	t.Helper()
	f, err := os.Open("testdata/iptables-nat.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseIPTablesSave(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseIPTablesSave(t *testing.T) {
	r := fixtureRules(t)
	if len(r) != 7 {
		t.Fatalf("got %d rules, want 7: %v", len(r), r)
	}
	last := r[6]
	if last.Table != "nat" || last.Chain != "DOCKER" || !reflect.DeepEqual(last.Args, []string{"-m", "comment", "--comment", "two words", "-j", "RETURN"}) {
		t.Errorf("quoted rule parsed as %+v", last)
	}
}

func TestRulesOf(t *testing.T) {
	got := rulesOf(fixtureRules(t), "ctrperf1a2b3c4d", "10.213.0.0/24")
	if len(got) != 2 {
		t.Fatalf("want the MASQUERADE and RETURN rules of the bridge, got %v", got)
	}
	if got := rulesOf(fixtureRules(t), "ctrperf1a2b3c4", ""); len(got) != 0 {
		t.Errorf("a prefix of the bridge name must not match: %v", got)
	}
}

// fakeIPT is an in-memory iptables: Save returns the current rules, Run
// applies -I/-D to them.
type fakeIPT struct {
	rules []ipRule
	ran   [][]string
	err   error
}

func (f *fakeIPT) Save(_ context.Context, table string) ([]ipRule, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []ipRule
	for _, r := range f.rules {
		if r.Table == table {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeIPT) Run(_ context.Context, args ...string) error {
	f.ran = append(f.ran, args)
	// args: -w -t TABLE -I|-D CHAIN [1] rule...
	table, op, chain := args[2], args[3], args[4]
	rest := args[5:]
	switch op {
	case "-I":
		r := ipRule{Table: table, Chain: chain, Args: rest[1:]}
		pos := 0
		for i, x := range f.rules {
			if x.Table == table && x.Chain == chain {
				pos = i
				break
			}
		}
		f.rules = append(f.rules[:pos], append([]ipRule{r}, f.rules[pos:]...)...)
	case "-D":
		for i, x := range f.rules {
			if x.Table == table && x.Chain == chain && reflect.DeepEqual(x.Args, rest) {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return nil
			}
		}
		return errors.New("no such rule")
	}
	return nil
}

func TestRestoreRules(t *testing.T) {
	before := fixtureRules(t)
	// What dockerd leaves after removeIPChains + setup: the DOCKER chain
	// holds only the new engine's rule; other chains are untouched.
	var after []ipRule
	for _, r := range before {
		if r.Chain != "DOCKER" {
			after = append(after, r)
		}
	}
	after = append(after, ipRule{Table: "nat", Chain: "DOCKER", Args: []string{"-i", "ctrperf99999999", "-j", "RETURN"}})
	f := &fakeIPT{rules: after}
	restored, err := restoreRules(context.Background(), f, before, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(restored) != 4 {
		t.Errorf("restored %d rules, want the 4 lost DOCKER rules: %v", len(restored), restored)
	}
	if m := missingRules(dockerChainRules(before), dockerChainRules(f.rules)); len(m) != 0 {
		t.Errorf("still missing after restore: %v", m)
	}
	var docker []string
	for _, r := range f.rules {
		if r.Chain == "DOCKER" {
			docker = append(docker, strings.Join(r.Args, " "))
		}
	}
	if docker[0] != "-i docker0 -j RETURN" || docker[len(docker)-1] != "-i ctrperf99999999 -j RETURN" {
		t.Errorf("restored rules must come first in their original order, got %v", docker)
	}
}

func TestDeleteRulesOf(t *testing.T) {
	f := &fakeIPT{rules: fixtureRules(t)}
	n, err := deleteRulesOf(context.Background(), f, "ctrperf1a2b3c4d", "10.213.0.0/24")
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2, nil", n, err)
	}
	if left := rulesOf(f.rules, "ctrperf1a2b3c4d", "10.213.0.0/24"); len(left) != 0 {
		t.Errorf("left behind %v", left)
	}
	if len(f.rules) != 5 {
		t.Errorf("other engines' rules must stay, have %d of 5", len(f.rules))
	}
	f.err = errors.New("iptables-save: not found")
	if _, err := deleteRulesOf(context.Background(), f, "x", ""); err == nil {
		t.Error("a failing iptables-save must be reported")
	}
}

// A network the user's engine removed while a private engine started must
// not come back as rules without a bridge.
func TestRestoreRulesSkipsGoneInterfaces(t *testing.T) {
	before := []ipRule{
		{Table: "nat", Chain: "DOCKER", Args: []string{"-i", "docker0", "-j", "RETURN"}},
		{Table: "nat", Chain: "DOCKER", Args: []string{"-i", "br-gone", "-j", "RETURN"}},
		{Table: "filter", Chain: "DOCKER-ISOLATION-STAGE-1", Args: []string{"-i", "br-gone", "!", "-o", "br-gone", "-j", "DOCKER-ISOLATION-STAGE-2"}},
		{Table: "filter", Chain: "DOCKER-ISOLATION-STAGE-2", Args: []string{"-o", "docker+", "-j", "DROP"}},
	}
	f := &fakeIPT{}
	restored, err := restoreRules(context.Background(), f, before, func(name string) bool { return name != "br-gone" })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range restored {
		got = append(got, strings.Join(r.Args, " "))
	}
	want := []string{"-i docker0 -j RETURN", "-o docker+ -j DROP"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restored %q, want %q (rules of br-gone left out)", got, want)
	}
}

// A dockerd with --userland-proxy=false hooks nat OUTPUT into DOCKER for
// loopback too, and leaves the hook behind when it stops: the engine
// records the hooks it added and its teardown removes exactly those.
func TestAddedJumpsAreRemoved(t *testing.T) {
	userHook := ipRule{Table: "nat", Chain: "OUTPUT", Args: []string{"!", "-d", "127.0.0.0/8", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"}}
	preHook := ipRule{Table: "nat", Chain: "PREROUTING", Args: []string{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"}}
	other := ipRule{Table: "nat", Chain: "POSTROUTING", Args: []string{"-s", "172.17.0.0/16", "-j", "MASQUERADE"}}
	before := []ipRule{preHook, userHook, other}
	hairpin := ipRule{Table: "nat", Chain: "OUTPUT", Args: []string{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"}}
	inChain := ipRule{Table: "nat", Chain: "DOCKER", Args: []string{"-i", "ctrperf1", "-j", "RETURN"}}
	f := &fakeIPT{rules: []ipRule{preHook, hairpin, userHook, other, inChain}}

	added, err := addedJumps(context.Background(), f, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || added[0].String() != hairpin.String() {
		t.Fatalf("added jumps = %v, want only the loopback hairpin hook", added)
	}
	n, err := deleteJumps(context.Background(), f, added)
	if err != nil || n != 1 {
		t.Fatalf("deleteJumps = %d, %v; want 1 deleted", n, err)
	}
	for _, r := range f.rules {
		if r.String() == hairpin.String() {
			t.Errorf("hairpin hook still there: %v", f.rules)
		}
	}
	if len(f.rules) != 4 {
		t.Errorf("other rules touched: %v", f.rules)
	}
	// Gone already (another teardown, or by hand): not an error.
	if n, err := deleteJumps(context.Background(), f, added); err != nil || n != 0 {
		t.Errorf("second deleteJumps = %d, %v; want 0, nil", n, err)
	}
}

// The loopback hook stays while the user's own engine runs with the
// userland proxy off (it made the hook itself), and goes otherwise.
func TestLoopbackHookKeptForUserEngine(t *testing.T) {
	saved := userEngineFlags
	t.Cleanup(func() { userEngineFlags = saved })
	o := buildOptions([]Option{WithRunDir(t.TempDir())})
	off := false
	st := &State{Name: "x", IPTables: true}
	st.Spec.UserlandProxy = &off

	userEngineFlags = func(Options) (DaemonFlags, bool) { return DaemonFlags{IPTables: true, UserlandProxy: false}, true }
	if who := jumpsStillNeeded(o, st); who == "" {
		t.Error("the user's engine with the proxy off needs the hook; it would be deleted")
	}
	userEngineFlags = func(Options) (DaemonFlags, bool) { return DaemonFlags{IPTables: true, UserlandProxy: true}, true }
	if who := jumpsStillNeeded(o, st); who != "" {
		t.Errorf("no engine needs the hook, but %q is said to", who)
	}
	if loopbackHook.String() != (ipRule{Table: "nat", Chain: "OUTPUT", Args: strings.Fields("-m addrtype --dst-type LOCAL -j DOCKER")}).String() {
		t.Errorf("loopback hook %v", loopbackHook)
	}
}
