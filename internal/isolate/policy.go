package isolate

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// Policy says what happens to a container that turns hot.
type Policy string

const (
	// PolicyShield demotes a hot container (cpu.idle=1, else the lowest CPU
	// weight) and leaves it on every CPU, so it still uses all idle time
	// while any normal task preempts it at once. Normal containers get
	// dedicated CPUs only where there are enough for all of them.
	PolicyShield Policy = "shield"
	// PolicyPaper releases a hot container to every CPU, as the paper did:
	// it keeps most of its throughput, quiet containers keep their own CPUs.
	PolicyPaper Policy = "paper"
	// PolicyStrict confines a hot container to the shared pool (the CPUs no
	// normal container owns), so quiet containers have their CPUs to
	// themselves.
	PolicyStrict Policy = "strict"
)

// Policies are the policies in the order the help lists them.
var Policies = []Policy{PolicyShield, PolicyPaper, PolicyStrict}

// Container is a managed container as the policy sees it.
type Container struct {
	ID   string
	Name string
	CPUs int // CPUs it is entitled to (label); 0 = a fair share of the machine
}

// ContainerState is what the policy remembers of a container between samples.
type ContainerState struct {
	Hot        bool          `json:"hot"`
	Dedicated  cpuset.CPUSet `json:"-"`
	HotStreak  int           `json:"hot_streak"`
	CalmStreak int           `json:"calm_streak"`
	// Demoted is the stall gate's memory: demoted now, and how many samples
	// passed without another container stalling.
	Demoted    bool `json:"demoted"`
	StallQuiet int  `json:"stall_quiet"`
	// StallStreak counts consecutive samples in which another container
	// stalled, while not yet demoted (Params.StallAfter).
	StallStreak int `json:"stall_streak,omitempty"`
}

// State is the policy's memory, keyed by container id.
type State map[string]ContainerState

// Placement is what a container should have now.
type Placement struct {
	ContainerID string
	Name        string
	// CPUs is the cpuset it should have; empty means its own (the value it
	// had before the controller touched it).
	CPUs   cpuset.CPUSet
	Pinned bool // CPUs are dedicated to it
	Hot    bool
	Demote bool // cpu.idle=1 (else the lowest weight) instead of its own class
	// Entitlement is the CPU it may use before it counts as saturated.
	Entitlement float64
	Reason      string
}

// Decision is the outcome of one policy step.
type Decision struct {
	State      State
	Placements map[string]Placement
	// SharedPool: CPUs no normal container owns. Never empty. Network IRQs
	// and the RPS of container veths go here.
	SharedPool cpuset.CPUSet
	// PinRefused says why normal containers were not given dedicated CPUs
	// ("" when they were, or when the policy does not pin).
	PinRefused string
	// Transitions names containers that changed hot/normal this step, with why.
	Transitions []Transition
}

// Transition is a container turning hot or normal.
type Transition struct {
	ContainerID string
	Name        string
	Hot         bool
	Reason      string
}

// Entitlement is the CPU a container may use before it counts as
// saturated: its label, else its fair share of the online CPUs among the
// managed containers; never more than the CPUs it is pinned to.
func Entitlement(c Container, online, managed, pinned int) float64 {
	e := float64(online)
	if c.CPUs > 0 {
		e = float64(c.CPUs)
	} else if managed > 0 {
		e = float64(online) / float64(managed)
	}
	if pinned > 0 && float64(pinned) < e {
		e = float64(pinned)
	}
	return e
}

// Decide computes the desired placement of every managed container from the
// topology, the previous state, the CPU each container used during the last
// interval (in CPUs: 1.0 = one CPU fully busy) and the fraction of the
// interval its tasks stalled waiting for a CPU (cgroup cpu.pressure "some";
// may be nil). It is a pure function.
func Decide(top Topology, params Params, prev State, containers []Container, usage, stall map[string]float64) Decision {
	p := params.withDefaults()
	all := top.All()
	want := func(c Container) int {
		if c.CPUs > 0 {
			return c.CPUs
		}
		return p.CPUsPerContainer
	}

	sorted := append([]Container(nil), containers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	ent := map[string]float64{}
	// The pinning policies measure a normal container against the CPUs it
	// is (or is about to be) pinned to, as the paper did.
	capOf := func(c Container, dedicated int) int {
		if p.Policy != PolicyShield {
			return want(c)
		}
		return dedicated
	}
	for _, c := range sorted {
		ent[c.ID] = Entitlement(c, all.Size(), len(sorted), capOf(c, prev[c.ID].Dedicated.Size()))
	}

	next := State{}
	var transitions []Transition
	// 1. Hysteresis: hot after HotAfter saturated samples, normal after CoolAfter calm ones.
	for _, c := range sorted {
		st := prev[c.ID]
		u, seen := usage[c.ID]
		e := ent[c.ID]
		if seen {
			if !st.Hot {
				if u >= p.HotThreshold*e {
					st.HotStreak++
				} else {
					st.HotStreak = 0
				}
				if st.HotStreak >= p.HotAfter {
					st.Hot, st.CalmStreak = true, 0
					transitions = append(transitions, Transition{c.ID, c.Name, true,
						fmt.Sprintf("used %.2f of its %.2f CPUs (>= %.0f%%) for %d samples", u, e, p.HotThreshold*100, st.HotStreak)})
				}
			} else {
				if u < p.CoolThreshold*e {
					st.CalmStreak++
				} else {
					st.CalmStreak = 0
				}
				if st.CalmStreak >= p.CoolAfter {
					st.Hot, st.HotStreak = false, 0
					transitions = append(transitions, Transition{c.ID, c.Name, false,
						fmt.Sprintf("used %.2f CPUs (< %.0f%% of its %.2f) for %d samples", u, p.CoolThreshold*100, e, st.CalmStreak)})
				}
			}
		}
		next[c.ID] = st
	}

	// 2. Dedicated sets for normal containers, outside the reserved shared
	// CPUs, only if every normal container gets its own: never more normal
	// containers on a CPU than cpus_per_container allows (kubelet's static
	// policy refuses rather than oversubscribe).
	reserved := reserveShared(top, p.MinShared)
	avail := all.Difference(reserved)
	var normals []Container
	need := 0
	for _, c := range sorted {
		st := next[c.ID]
		if st.Hot {
			st.Dedicated = cpuset.New()
			next[c.ID] = st
			continue
		}
		normals = append(normals, c)
		need += want(c)
	}
	refused := ""
	if len(normals) > 0 && need > avail.Size() {
		refused = fmt.Sprintf("%d normal container(s) need %d dedicated CPU(s), only %d outside the shared pool %s: not pinning rather than putting two on one CPU",
			len(normals), need, avail.Size(), reserved)
		for _, c := range normals {
			st := next[c.ID]
			st.Dedicated = cpuset.New()
			next[c.ID] = st
		}
	} else {
		owners := map[int]int{}
		placed := map[string]bool{}
		// Keep a still-valid previous set so that containers do not move.
		for _, c := range normals {
			d := next[c.ID].Dedicated
			if d.Size() == want(c) && d.IsSubsetOf(avail) && free(d, owners) {
				for _, cpu := range d.List() {
					owners[cpu]++
				}
				placed[c.ID] = true
			}
		}
		for _, c := range normals {
			if placed[c.ID] {
				continue
			}
			st := next[c.ID]
			d, _ := takeFree(top, avail, owners, want(c)) // enough by the count above
			for _, cpu := range d.List() {
				owners[cpu]++
			}
			st.Dedicated = d
			next[c.ID] = st
		}
	}

	owned := cpuset.New()
	for _, c := range normals {
		owned = owned.Union(next[c.ID].Dedicated)
	}
	pool := all.Difference(owned)
	if pool.IsEmpty() { // cannot happen with reserved CPUs, but never hand out an empty set
		pool = all
	}
	confine := pool
	if owned.IsEmpty() {
		confine = reserved // nobody pinned: strict still keeps the hot ones off the rest
	}

	// 3. Demotion, optionally only while another container stalls.
	anyStall := func(except string) bool {
		for _, c := range sorted {
			if c.ID != except && !next[c.ID].Hot && stall[c.ID] >= p.StallThreshold {
				return true
			}
		}
		return false
	}
	demotes := p.Demotes()
	for _, c := range sorted {
		st := next[c.ID]
		switch {
		case !st.Hot || !demotes:
			st.Demoted, st.StallQuiet, st.StallStreak = false, 0, 0
		case !p.StallGate:
			st.Demoted = true
		case anyStall(c.ID):
			st.StallStreak++
			if st.Demoted || st.StallStreak >= p.StallAfter {
				st.Demoted, st.StallQuiet, st.StallStreak = true, 0, 0
			}
		case st.Demoted:
			st.StallQuiet++
			if st.StallQuiet >= p.CoolAfter {
				st.Demoted, st.StallQuiet = false, 0
			}
		default:
			st.StallStreak = 0 // the stalls must be consecutive
		}
		next[c.ID] = st
	}

	placements := map[string]Placement{}
	for _, c := range sorted {
		st := next[c.ID]
		pl := Placement{ContainerID: c.ID, Name: c.Name, Hot: st.Hot, Demote: st.Demoted,
			Entitlement: Entitlement(c, all.Size(), len(sorted), capOf(c, st.Dedicated.Size()))}
		switch {
		case st.Hot && p.Policy == PolicyStrict:
			pl.CPUs, pl.Reason = confine, "hot: confined to the shared pool"
		case st.Hot && p.Policy == PolicyPaper:
			pl.CPUs, pl.Reason = all, "hot: released to all CPUs"
		case st.Hot:
			pl.Reason = "hot: keeps its CPUs"
		case !st.Dedicated.IsEmpty():
			pl.CPUs, pl.Pinned, pl.Reason = st.Dedicated, true, "dedicated"
		case refused != "" && p.Policy != PolicyShield:
			pl.Reason = "not pinned: " + refused
		case refused != "":
			pl.Reason = "normal: too few CPUs to dedicate, keeps its own"
		default:
			pl.Reason = "normal"
		}
		if pl.Demote {
			pl.Reason += "; demoted (idle class)"
		} else if st.Hot && demotes && p.StallGate {
			pl.Reason += "; not demoted: no other container stalls"
		}
		placements[c.ID] = pl
	}
	if p.Policy == PolicyShield {
		refused = "" // shield pins only where it can; not pinning is no refusal
	}
	return Decision{State: next, Placements: placements, SharedPool: pool, PinRefused: refused, Transitions: transitions}
}

// reserveShared picks the CPUs that always stay in the shared pool: whole
// cores from the lowest-numbered, at least n CPUs, but never every CPU when
// there is more than one core.
func reserveShared(top Topology, n int) cpuset.CPUSet {
	cores := top.Cores()
	res := cpuset.New()
	for i, core := range cores {
		if res.Size() >= n {
			break
		}
		if i == len(cores)-1 && i > 0 {
			break // leave at least one core to dedicate
		}
		res = res.Union(core)
	}
	if res.IsEmpty() && len(cores) > 0 {
		res = cores[0]
	}
	return res
}

func free(d cpuset.CPUSet, owners map[int]int) bool {
	for _, cpu := range d.List() {
		if owners[cpu] > 0 {
			return false
		}
	}
	return true
}

// takeFree takes n unowned CPUs from avail: whole free cores first (so SMT
// siblings stay together), then single CPUs from the cores with fewest free
// CPUs (keeping whole cores free for later).
func takeFree(top Topology, avail cpuset.CPUSet, owners map[int]int, n int) (cpuset.CPUSet, bool) {
	var freeCores [][]int
	for _, core := range top.Cores() {
		var f []int
		for _, cpu := range core.Intersection(avail).List() {
			if owners[cpu] == 0 {
				f = append(f, cpu)
			}
		}
		if len(f) > 0 {
			freeCores = append(freeCores, f)
		}
	}
	total := 0
	for _, f := range freeCores {
		total += len(f)
	}
	if total < n {
		return cpuset.New(), false
	}
	tpc := top.ThreadsPerCore()
	var got []int
	// Whole cores while at least a core's worth is still needed.
	for i, f := range freeCores {
		if n-len(got) >= tpc && len(f) == tpc {
			got = append(got, f...)
			freeCores[i] = nil
		}
	}
	// Then the fullest-used cores first.
	sort.SliceStable(freeCores, func(i, j int) bool { return len(freeCores[i]) < len(freeCores[j]) })
	for _, f := range freeCores {
		for _, cpu := range f {
			if len(got) == n {
				break
			}
			got = append(got, cpu)
		}
	}
	return cpuset.New(got...), true
}

// IRQCPU is the CPU that interrupts go to at rotation step `step`: the
// paper's round-robin over the CPUs no container owns.
func IRQCPU(pool cpuset.CPUSet, step int) (int, error) {
	l := pool.List()
	if len(l) == 0 {
		return 0, fmt.Errorf("empty shared pool: refusing to steer interrupts nowhere")
	}
	if step < 0 {
		step = -step
	}
	return l[step%len(l)], nil
}
