package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
)

func TestOwnershipDecides(t *testing.T) {
	liveRec := owner.Status{Record: owner.Record{Kind: owner.KindBench, Session: "smoke-aaaaaa", PID: 10, Command: []string{"ctrperf", "bench", "run"},
		Started: time.Unix(0, 0), Objects: []string{"smoke-aaaaaa-000"}}, Live: true, Reason: "its lock is held"}
	deadRec := owner.Status{Record: owner.Record{Kind: owner.KindBench, Session: "smoke-bbbbbb", PID: 11, Command: []string{"ctrperf"}}, Reason: "its lock is free: the owner is gone"}
	ow := owner.Owners{liveRec, deadRec}
	tests := []struct {
		desc     string
		force    bool
		what     string
		runID    string
		kept     bool
		live     bool
		ownerHas string
	}{
		{"a live session's container is kept", false, "container a", "smoke-aaaaaa-001", true, true, "pid 10"},
		{"a live session's private engine is kept", false, "private engine e", "smoke-aaaaaa", true, true, "pid 10"},
		{"a dead session's container goes", false, "container b", "smoke-bbbbbb-001", false, false, "lock is free"},
		{"an object from before owner records goes", false, "container c", "smoke-cccccc-001", false, false, "no owner record"},
		{"--force removes a live one", true, "container d", "smoke-aaaaaa-002", false, true, "pid 10"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			o := NewOwnership(ow, tc.force)
			if got := o.Keep(tc.what, tc.runID); got != tc.kept {
				t.Errorf("Keep = %v, want %v", got, tc.kept)
			}
			f := o.Found()
			if len(f) != 1 || f[0].Live != tc.live || f[0].Kept != tc.kept || !strings.Contains(f[0].Owner, tc.ownerHas) {
				t.Errorf("Found = %+v, want live %v owner containing %q", f, tc.live, tc.ownerHas)
			}
		})
	}
	o := NewOwnership(ow, false)
	ns, hostIf, _ := externalNames("smoke-aaaaaa-000")
	if !o.keepExternal("netns "+ns, ns, "") || !o.keepExternal("veth "+hostIf, hostIf, "") {
		t.Error("the live run's netns or veth is not kept")
	}
	if o.keepExternal("netns ctrperf-00000000", "ctrperf-00000000", "") {
		t.Error("a netns of no recorded run is kept")
	}
	if !o.KeepShared("private engine ctrperf-default") {
		t.Error("the shared engine is not kept while a session is live")
	}
	if NewOwnership(owner.Owners{deadRec}, false).KeepShared("private engine ctrperf-default") {
		t.Error("the shared engine is kept with no live session")
	}
	// On a host of a plan's hosts the live sessions are agents: a clean
	// there (another test's, a user's) took the engine a live agent's run
	// was measuring on (found on the lab, 2026-11-28).
	agentRec := owner.Status{Record: owner.Record{Kind: owner.KindAgent, Session: "lab-network-5028b8", PID: 12, Command: []string{"ctrperf", "agent"}},
		Live: true, Reason: "its lock is held"}
	if !NewOwnership(owner.Owners{deadRec, agentRec}, false).KeepShared("private engine ctrperf-auto-native-noproxy") {
		t.Error("the shared engine is not kept while an agent session is live")
	}
	var nilOwn *Ownership
	if nilOwn.Keep("x", "smoke-aaaaaa-000") || nilOwn.Found() != nil {
		t.Error("a nil Ownership keeps or records something")
	}
}

// A generator's cgroup is its process's: kept while that runs or the group
// holds processes, removed once it is gone.
func TestCleanGeneratorCgroupsByOwner(t *testing.T) {
	root := t.TempDir()
	self := os.Getpid()
	for _, d := range []string{"cpu/ctrperf/generator-" + itoa(self), "cpu/ctrperf/generator-999999999", "cpu/ctrperf/generator-123"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "cpu/ctrperf/generator-123/cgroup.procs"), []byte("123\n"), 0o644)
	o := NewOwnership(nil, false)
	removed, err := cleanGeneratorCgroups(kernel.NewFS(kernel.Roots{Cgroup: root}), "", false, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cgroup " + filepath.Join(root, "cpu/ctrperf/generator-999999999")}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, f := range o.Found() {
		if strings.HasSuffix(f.What, "generator-999999999") == f.Live {
			t.Errorf("%+v: wrong liveness", f)
		}
	}
	for _, d := range []string{"generator-" + itoa(self), "generator-123"} {
		if _, err := os.Stat(filepath.Join(root, "cpu/ctrperf", d)); err != nil {
			t.Errorf("live %s removed", d)
		}
	}
}

// A session that started after clean read the owners still keeps its
// objects: a miss reads them again.
func TestOwnershipRereadsOnAMiss(t *testing.T) {
	late := owner.Status{Record: owner.Record{Kind: owner.KindBench, Session: "smoke-dddddd", PID: 12, Objects: []string{"smoke-dddddd-000"}}, Live: true}
	reads := 0
	o := NewOwnership(nil, false).Refreshing(func() (owner.Owners, error) { reads++; return owner.Owners{late}, nil })
	if !o.Keep("container x", "smoke-dddddd-000") {
		t.Error("a late session's container is not kept")
	}
	ns, _, _ := externalNames("smoke-dddddd-000")
	if !o.keepExternal("netns "+ns, ns, "") {
		t.Error("a late session's netns is not kept")
	}
	if o.Keep("container y", "smoke-eeeeee-000") || reads != 2 {
		t.Errorf("an orphan kept, or %d reads, want 2 (one per miss)", reads)
	}
}

// The shared default engine of a session that started after clean read
// the owners is kept too (issue 24 item 8): a miss reads them again.
func TestOwnershipSharedRereadsOnAMiss(t *testing.T) {
	late := owner.Status{Record: owner.Record{Kind: owner.KindBench, Session: "smoke-ffffff", PID: 13}, Live: true}
	tests := []struct {
		desc  string
		later owner.Owners // what a second reading finds
		want  bool
	}{
		{"a session started since the first reading", owner.Owners{late}, true},
		{"still none live", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			reads := 0
			o := NewOwnership(nil, false).Refreshing(func() (owner.Owners, error) { reads++; return tc.later, nil })
			if got := o.KeepShared("private engine ctrperf-default"); got != tc.want || reads != 1 {
				t.Errorf("KeepShared = %v after %d reads, want %v after 1", got, reads, tc.want)
			}
		})
	}
}
