package isolate

import (
	"fmt"
	"math/rand"
	"testing"

	"k8s.io/utils/cpuset"
)

// flat: n CPUs, one per core, one socket (this machine: 2 CPUs, no SMT).
func flat(n int) Topology {
	var t Topology
	for i := 0; i < n; i++ {
		t.CPUs = append(t.CPUs, CPU{ID: i, Core: i})
	}
	return t
}

// smt: cores × 2 threads per socket, Intel numbering (sibling of cpu i is i+cores*sockets).
func smt(sockets, coresPerSocket int) Topology {
	var t Topology
	n := sockets * coresPerSocket
	for thread := 0; thread < 2; thread++ {
		for s := 0; s < sockets; s++ {
			for c := 0; c < coresPerSocket; c++ {
				t.CPUs = append(t.CPUs, CPU{ID: thread*n + s*coresPerSocket + c, Core: c, Socket: s})
			}
		}
	}
	return t
}

func ctrs(n int, cpus int) []Container {
	var out []Container
	for i := 0; i < n; i++ {
		out = append(out, Container{ID: fmt.Sprintf("c%02d", i), Name: fmt.Sprintf("tenant%d", i), CPUs: cpus})
	}
	return out
}

func TestDecidePlacement(t *testing.T) {
	tests := []struct {
		desc       string
		top        Topology
		params     Params
		containers []Container
		wantCPUs   map[string]string // "" = its own cpuset, untouched
		wantPool   string
		refused    bool
	}{
		{"2 CPUs, one tenant gets the non-reserved CPU", flat(2), Params{Policy: PolicyPaper}, ctrs(1, 0),
			map[string]string{"c00": "1"}, "0", false},
		{"2 CPUs, three tenants: paper refuses to put three on CPU 1", flat(2), Params{Policy: PolicyPaper}, ctrs(3, 0),
			map[string]string{"c00": "", "c01": "", "c02": ""}, "0-1", true},
		{"2 CPUs, three tenants: shield pins nobody, and says no refusal", flat(2), Params{}, ctrs(3, 0),
			map[string]string{"c00": "", "c01": "", "c02": ""}, "0-1", false},
		{"16 CPUs with SMT: two-CPU tenants get whole cores", smt(1, 8), Params{Policy: PolicyPaper, CPUsPerContainer: 2}, ctrs(2, 0),
			map[string]string{"c00": "1,9", "c01": "2,10"}, "0,3-8,11-15", false},
		{"16 CPUs with SMT: one-CPU tenants pack onto one core's siblings", smt(1, 8), Params{Policy: PolicyStrict}, ctrs(2, 0),
			map[string]string{"c00": "1", "c01": "9"}, "0,2-8,10-15", false},
		{"64 CPUs two sockets: eight 2-CPU tenants, reserved core 0 of socket 0", smt(2, 16), Params{CPUsPerContainer: 2}, ctrs(8, 0),
			map[string]string{"c00": "1,33", "c07": "8,40"}, "0,9-32,41-63", false},
		{"per-container CPU count from the label", flat(8), Params{Policy: PolicyPaper}, []Container{{ID: "a", CPUs: 3}, {ID: "b"}},
			map[string]string{"a": "1-3", "b": "4"}, "0,5-7", false},
		{"a label asking for more than is left refuses everyone", flat(4), Params{Policy: PolicyPaper}, []Container{{ID: "a", CPUs: 3}, {ID: "b"}},
			map[string]string{"a": "", "b": ""}, "0-3", true},
		{"MinShared 2 reserves two CPUs", flat(4), Params{Policy: PolicyPaper, MinShared: 2}, ctrs(2, 0),
			map[string]string{"c00": "2", "c01": "3"}, "0-1", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := Decide(tc.top, tc.params, nil, tc.containers, nil, nil)
			for id, want := range tc.wantCPUs {
				if got := d.Placements[id].CPUs.String(); got != want {
					t.Errorf("%s: cpus %q, want %q (reason %s)", id, got, want, d.Placements[id].Reason)
				}
				if d.Placements[id].Pinned != (want != "") {
					t.Errorf("%s: pinned %v with cpus %q", id, d.Placements[id].Pinned, want)
				}
			}
			if got := d.SharedPool.String(); got != tc.wantPool {
				t.Errorf("pool %q, want %q", got, tc.wantPool)
			}
			if (d.PinRefused != "") != tc.refused {
				t.Errorf("refused %q, want refused=%v", d.PinRefused, tc.refused)
			}
		})
	}
}

// run feeds Decide a sequence of usage samples and returns every decision.
func run(top Topology, p Params, cs []Container, samples []map[string]float64, stall map[string]float64) []Decision {
	var st State
	var out []Decision
	for _, u := range samples {
		d := Decide(top, p, st, cs, u, stall)
		st = d.State
		out = append(out, d)
	}
	return out
}

func repeat(u map[string]float64, n int) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = u
	}
	return out
}

func TestShield(t *testing.T) {
	two := flat(2)
	tenants := []Container{{ID: "hot1", Name: "hot1"}, {ID: "hot2", Name: "hot2"}, {ID: "tenant1", Name: "tenant1"}}
	tests := []struct {
		desc    string
		top     Topology
		cs      []Container
		usage   map[string]float64
		n       int
		demoted []string
		pinned  map[string]string
	}{
		// Seed 002 scenario 2 on this machine: 3 tenants on 2 CPUs, the
		// fair share is 0.67 CPUs; the hot one takes 1.7.
		{"one hot of three on 2 CPUs: demoted after 2 samples, nobody pinned (2 normal, 1 free CPU)", two, tenants,
			map[string]float64{"hot1": 0.08, "hot2": 1.7, "tenant1": 0.08}, 2, []string{"hot2"}, nil},
		{"one sample is not enough", two, tenants, map[string]float64{"hot1": 0.08, "hot2": 1.7, "tenant1": 0.08}, 1, nil, nil},
		// Scenario 3: two hot ones at 0.9 CPU each, both above 0.9 x 0.67;
		// the quiet one is then alone and gets CPU 1.
		{"two hot of three on 2 CPUs: both demoted, the quiet one pinned", two, tenants,
			map[string]float64{"hot1": 0.9, "hot2": 0.9, "tenant1": 0.08}, 2, []string{"hot1", "hot2"}, map[string]string{"tenant1": "1"}},
		{"a container with a CPU label is measured against it", flat(8), []Container{{ID: "big", CPUs: 4}, {ID: "small"}},
			map[string]float64{"big": 3.0, "small": 0.1}, 3, nil, map[string]string{"big": "1-4", "small": "5"}},
		{"above its label it is hot", flat(8), []Container{{ID: "big", CPUs: 4}, {ID: "small"}},
			map[string]float64{"big": 3.8, "small": 0.1}, 3, []string{"big"}, map[string]string{"small": "5"}}, // it does not move
		{"more tenants than CPUs: twenty on 2 CPUs, the hot one is found against 0.1 CPU", two, ctrs(20, 0),
			map[string]float64{"c07": 0.5}, 2, []string{"c07"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ds := run(tc.top, Params{}, tc.cs, repeat(tc.usage, tc.n), nil)
			d := ds[len(ds)-1]
			var demoted []string
			for _, c := range tc.cs {
				pl := d.Placements[c.ID]
				if pl.Demote {
					demoted = append(demoted, c.ID)
					if !pl.CPUs.IsEmpty() {
						t.Errorf("%s demoted but moved to %s: shield leaves it every CPU", c.ID, pl.CPUs)
					}
				}
				if want := tc.pinned[c.ID]; pl.CPUs.String() != want && !pl.Hot {
					t.Errorf("%s: cpus %q, want %q (%s)", c.ID, pl.CPUs, want, pl.Reason)
				}
			}
			if fmt.Sprint(demoted) != fmt.Sprint(tc.demoted) && !(len(demoted) == 0 && len(tc.demoted) == 0) {
				t.Errorf("demoted %v, want %v", demoted, tc.demoted)
			}
			if d.PinRefused != "" {
				t.Errorf("shield reported a refusal: %s", d.PinRefused)
			}
		})
	}
}

func TestStallGate(t *testing.T) {
	cs := []Container{{ID: "hot"}, {ID: "quiet"}}
	p := Params{StallGate: true, CoolAfter: 3}
	busy := map[string]float64{"hot": 1.9, "quiet": 0.05}
	// No stall: hot but not demoted.
	ds := run(flat(2), p, cs, repeat(busy, 4), map[string]float64{"quiet": 0.001})
	if pl := ds[3].Placements["hot"]; !pl.Hot || pl.Demote {
		t.Fatalf("no stall: hot=%v demote=%v, want hot and not demoted (%s)", pl.Hot, pl.Demote, pl.Reason)
	}
	// The quiet one stalls: demoted; the hot one's own stall does not count.
	var st State
	for i := 0; i < 3; i++ {
		st = Decide(flat(2), p, st, cs, busy, map[string]float64{"quiet": 0.05, "hot": 0.5}).State
	}
	if !st["hot"].Demoted {
		t.Fatalf("victim stalls: not demoted")
	}
	// The stall ends: demoted for CoolAfter more samples, then not.
	var d Decision
	for i := 0; i < 3; i++ {
		d = Decide(flat(2), p, st, cs, busy, map[string]float64{"quiet": 0})
		st = d.State
		if i < 2 && !d.Placements["hot"].Demote {
			t.Fatalf("released after %d quiet samples, want %d", i+1, p.CoolAfter)
		}
	}
	if d.Placements["hot"].Demote {
		t.Errorf("still demoted after %d samples without a stall", p.CoolAfter)
	}
}

func TestPaperAndStrictMayDemote(t *testing.T) {
	cs := []Container{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	u := map[string]float64{"a": 1, "b": 0.1, "c": 0.1}
	for _, pol := range []Policy{PolicyPaper, PolicyStrict} {
		for _, demote := range []bool{false, true} {
			ds := run(flat(4), Params{Policy: pol, Demote: demote, HotAfter: 2}, cs, repeat(u, 2), nil)
			if got := ds[1].Placements["a"].Demote; got != demote {
				t.Errorf("%s demote=%v: placement demote %v", pol, demote, got)
			}
		}
	}
}

// step runs the policy over a sequence of usage samples for one hot candidate.
func TestHysteresisAndPolicies(t *testing.T) {
	top := flat(4) // pool {0}, tenants a,b,c get 1,2,3
	cs := []Container{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	tests := []struct {
		desc    string
		policy  Policy
		usageA  []float64
		wantHot []bool
		// cpuset of a after the last sample
		wantA string
		// pool after the last sample
		wantPool string
	}{
		{"two saturated samples are not enough", PolicyPaper, []float64{1, 1}, []bool{false, false}, "1", "0"},
		{"a dip resets the streak", PolicyPaper, []float64{1, 1, 0.2, 1, 1}, []bool{false, false, false, false, false}, "1", "0"},
		{"paper: hot after three, released to all CPUs, its CPU returns to the pool", PolicyPaper, []float64{1, 0.95, 1}, []bool{false, false, true}, "0-3", "0-1"},
		{"strict: hot after three, confined to the pool", PolicyStrict, []float64{1, 1, 1}, []bool{false, false, true}, "0-1", "0-1"},
		{"hot stays hot through four calm samples", PolicyStrict, []float64{1, 1, 1, 0.1, 0.1, 0.1, 0.1}, []bool{false, false, true, true, true, true, true}, "0-1", "0-1"},
		{"normal again after five calm samples, gets a dedicated CPU back", PolicyPaper, []float64{1, 1, 1, 0.1, 0.1, 0.1, 0.1, 0.1}, []bool{false, false, true, true, true, true, true, false}, "1", "0"},
		{"a busy hot container does not cool", PolicyPaper, []float64{1, 1, 1, 2.5, 0.1, 0.1, 0.1, 0.1, 1.5}, []bool{false, false, true, true, true, true, true, true, true}, "0-3", "0-1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var st State
			var d Decision
			for i, u := range tc.usageA {
				d = Decide(top, Params{Policy: tc.policy, HotAfter: 3, CoolAfter: 5}, st, cs, map[string]float64{"a": u, "b": 0.1, "c": 0.2}, nil)
				st = d.State
				if got := d.Placements["a"].Hot; got != tc.wantHot[i] {
					t.Fatalf("sample %d (usage %.2f): hot=%v, want %v", i, u, got, tc.wantHot[i])
				}
				// Quiet tenants never move.
				if d.Placements["b"].CPUs.String() != "2" || d.Placements["c"].CPUs.String() != "3" {
					t.Fatalf("sample %d: quiet tenants moved: b=%s c=%s", i, d.Placements["b"].CPUs, d.Placements["c"].CPUs)
				}
			}
			if got := d.Placements["a"].CPUs.String(); got != tc.wantA {
				t.Errorf("a cpus %q, want %q", got, tc.wantA)
			}
			if got := d.SharedPool.String(); got != tc.wantPool {
				t.Errorf("pool %q, want %q", got, tc.wantPool)
			}
		})
	}
}

func TestStableWhenContainersComeAndGo(t *testing.T) {
	top := flat(8)
	d := Decide(top, Params{Policy: PolicyPaper}, nil, ctrs(3, 0), nil, nil)
	before := map[string]string{}
	for id, p := range d.Placements {
		before[id] = p.CPUs.String()
	}
	// c01 leaves, two new ones arrive: the others keep their CPUs.
	cs := append(ctrs(3, 0)[:1], ctrs(3, 0)[2], Container{ID: "new1"}, Container{ID: "new2"})
	d2 := Decide(top, Params{Policy: PolicyPaper}, d.State, cs, nil, nil)
	for _, id := range []string{"c00", "c02"} {
		if got := d2.Placements[id].CPUs.String(); got != before[id] {
			t.Errorf("%s moved from %s to %s", id, before[id], got)
		}
	}
	if _, ok := d2.State["c01"]; ok {
		t.Errorf("state of removed container c01 kept")
	}
	if d2.Placements["new1"].CPUs.Intersection(d2.Placements["new2"].CPUs).Size() != 0 {
		t.Errorf("new containers share CPUs while free ones exist")
	}
}

// TestNeverEmpty drives random churn and usage over several topologies: no
// pinned placement and no shared pool is ever empty, dedicated sets never
// overlap, and nothing dedicated is in the pool.
func TestNeverEmpty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, top := range []Topology{flat(1), flat(2), smt(1, 8), smt(2, 16)} {
		for _, pol := range Policies {
			var st State
			live := map[string]Container{}
			for step := 0; step < 400; step++ {
				if rng.Intn(3) == 0 {
					id := fmt.Sprintf("x%d", rng.Intn(40))
					if _, ok := live[id]; ok {
						delete(live, id)
					} else {
						live[id] = Container{ID: id, CPUs: rng.Intn(3)}
					}
				}
				var cs []Container
				usage := map[string]float64{}
				for id, c := range live {
					cs = append(cs, c)
					usage[id] = rng.Float64() * 2
				}
				d := Decide(top, Params{Policy: pol}, st, cs, usage, nil)
				st = d.State
				if d.SharedPool.IsEmpty() {
					t.Fatalf("%d CPUs %s step %d: empty shared pool", len(top.CPUs), pol, step)
				}
				seen := cpuset.New()
				for id, p := range d.Placements {
					if p.Pinned && p.CPUs.IsEmpty() {
						t.Fatalf("%d CPUs %s step %d: %s pinned to an empty cpuset", len(top.CPUs), pol, step, id)
					}
					if !p.CPUs.IsSubsetOf(top.All()) {
						t.Fatalf("%s placed outside the machine: %s", id, p.CPUs)
					}
					if p.Pinned {
						if seen.Intersection(p.CPUs).Size() > 0 {
							t.Fatalf("step %d: %s overlaps another dedicated set: two normal containers on one CPU", step, id)
						}
						if p.CPUs.Intersection(d.SharedPool).Size() > 0 {
							t.Fatalf("step %d: %s's dedicated CPUs %s are in the pool %s", step, id, p.CPUs, d.SharedPool)
						}
						seen = seen.Union(p.CPUs)
					}
				}
				if len(d.State) != len(live) {
					t.Fatalf("stale state: %d entries for %d containers", len(d.State), len(live))
				}
			}
		}
	}
}

func TestIRQRotation(t *testing.T) {
	pool := cpuset.New(0, 3, 5)
	var got []int
	for step := 0; step < 5; step++ {
		c, err := IRQCPU(pool, step)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if fmt.Sprint(got) != "[0 3 5 0 3]" {
		t.Errorf("rotation %v", got)
	}
	if _, err := IRQCPU(cpuset.New(), 0); err == nil {
		t.Errorf("empty pool accepted")
	}
}

func TestHexMask(t *testing.T) {
	tests := []struct {
		desc string
		set  cpuset.CPUSet
		n    int
		want string
	}{
		{"cpu0 of 2", cpuset.New(0), 2, "1"},
		{"cpu1 of 2", cpuset.New(1), 2, "2"},
		{"both of 2", cpuset.New(0, 1), 2, "3"},
		{"first and last of 64", cpuset.New(0, 63), 64, "80000000,00000001"},
		{"none", cpuset.New(), 4, "0"},
	}
	for _, tc := range tests {
		got := HexMask(tc.set, tc.n)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
		back, err := ParseHexMask(got)
		if err != nil || !back.Equals(tc.set) {
			t.Errorf("%s: round trip %q -> %s, %v", tc.desc, got, back, err)
		}
	}
	if _, err := ParseHexMask("zz"); err == nil {
		t.Errorf("bad mask accepted")
	}
}

// saturatedMachine is the CPU a hot spinner gets on 2 CPUs that normal
// tenants outside the controller keep busy: demoted (the idle class), it
// is starved — next to no usage, its tasks waiting all the time; in the
// normal class it gets a fair share and waits part of the time.
func saturatedMachine(demoted bool) (usage, stall float64) {
	if demoted {
		return 0.01, 0.98
	}
	return 1.0, 0.5
}

// TestNoFlappingOnASaturatedMachine: the spinner, demoted, is starved by
// its own demotion. Before issue 36 its usage fell below cool_threshold,
// it was undemoted after cool_after samples and turned hot again two
// samples later: 100 transitions a minute at the default 100 ms interval.
// Its own stall now counts as demand while it is demoted: one transition
// (to hot) in the minute, and it still cools once it really goes quiet.
func TestNoFlappingOnASaturatedMachine(t *testing.T) {
	cs := []Container{{ID: "spin", Name: "spin"}, {ID: "quiet", Name: "quiet"}}
	p := DefaultParams()
	var st State
	transitions := 0
	const minute = 600 // samples of 100 ms
	for range minute {
		u, s := saturatedMachine(st["spin"].Demoted)
		d := Decide(flat(2), p, st, cs, map[string]float64{"spin": u, "quiet": 0.05}, map[string]float64{"spin": s, "quiet": 0.3})
		transitions += len(d.Transitions)
		st = d.State
	}
	t.Logf("transitions in a minute of saturation: %d", transitions)
	if transitions > 1 {
		t.Errorf("%d transitions in a minute on a saturated machine, want 1 (hot once, then demoted until it goes quiet)", transitions)
	}
	if !st["spin"].Hot || !st["spin"].Demoted {
		t.Fatalf("after a minute the spinner is hot=%v demoted=%v, want both", st["spin"].Hot, st["spin"].Demoted)
	}
	// It stops spinning: no usage, no stall; it cools after cool_after samples.
	for i := range p.CoolAfter {
		d := Decide(flat(2), p, st, cs, map[string]float64{"spin": 0, "quiet": 0.05}, map[string]float64{"spin": 0, "quiet": 0})
		st = d.State
		if i < p.CoolAfter-1 && !st["spin"].Hot {
			t.Fatalf("cooled after %d quiet samples, want %d", i+1, p.CoolAfter)
		}
	}
	if st["spin"].Hot || st["spin"].Demoted {
		t.Errorf("after %d quiet samples the spinner is hot=%v demoted=%v, want neither", p.CoolAfter, st["spin"].Hot, st["spin"].Demoted)
	}
}
