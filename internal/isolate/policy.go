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
	// Request is what its pod asked for (CPUs, may be a fraction); it
	// replaces the fair share when CPUs is 0.
	Request float64
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
// saturated: its label; else, for a pod that requested CPU, its share of
// the online CPUs weighted by its request among the managed containers'
// requests (requested: their sum), which is what cpu.shares gives it under
// contention and never less than its request; else its fair share of the
// online CPUs among the managed containers; never more than the CPUs it
// is pinned to.
//
// So a Burstable pod at twice its small request, beside another at fifteen
// times the same request, is not the hot one: both are entitled to half
// the machine, and only the second uses more.
func Entitlement(c Container, online, managed int, requested float64, pinned int) float64 {
	e := float64(online)
	if c.CPUs > 0 {
		e = float64(c.CPUs)
	} else if c.Request > 0 && requested > 0 {
		e = min(max(float64(online)*c.Request/requested, c.Request), float64(online))
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
// may be nil). It is a pure function, in four steps: hysteresis (who is
// hot), dedication (whose CPUs), demotion (whose class) and placement.
func Decide(top Topology, params Params, prev State, containers []Container, usage, stall map[string]float64) Decision {
	d := newDecider(top, params, containers)
	next, transitions := d.hysteresis(prev, usage, stall)
	dedicated, pin := d.dedicate(next)
	for id, cpus := range dedicated {
		st := next[id]
		st.Dedicated = cpus
		next[id] = st
	}
	next = d.demote(next, stall)
	placements := map[string]Placement{}
	for _, c := range d.sorted {
		placements[c.ID] = d.place(c, next[c.ID], pin)
	}
	refused := pin.refused
	if d.p.Policy == PolicyShield {
		refused = "" // shield pins only where it can; not pinning is no refusal
	}
	return Decision{State: next, Placements: placements, SharedPool: pin.pool, PinRefused: refused, Transitions: transitions}
}

// decider is what every step of one Decide reads: the parameters with
// their defaults, the online CPUs and the containers in id order.
type decider struct {
	p      Params
	top    Topology
	all    cpuset.CPUSet
	sorted []Container
	// requested is the managed containers' CPU requests summed, each at
	// least kubelet's floor (a BestEffort pod's 2 shares): 0 when none
	// requested any (Docker), and then every share is fair.
	requested float64
}

// minRequest is a BestEffort pod's weight: kubelet's 2 cpu.shares.
const minRequest = 2.0 / 1024

func newDecider(top Topology, params Params, containers []Container) decider {
	sorted := append([]Container(nil), containers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	var requested float64
	for _, c := range sorted {
		if c.Request > 0 {
			requested += c.Request
		}
	}
	if requested > 0 {
		for _, c := range sorted {
			if c.Request <= 0 {
				requested += minRequest
			}
		}
	}
	return decider{p: params.withDefaults(), top: top, all: top.All(), sorted: sorted, requested: requested}
}

// want is how many dedicated CPUs a normal container gets.
func (d decider) want(c Container) int {
	if c.CPUs > 0 {
		return c.CPUs
	}
	return d.p.CPUsPerContainer
}

// entitlement is c's Entitlement with dedicated CPUs of its own. The
// pinning policies measure a normal container against the CPUs it is (or
// is about to be) pinned to, as the paper did.
func (d decider) entitlement(c Container, dedicated int) float64 {
	pinned := dedicated
	if d.p.Policy != PolicyShield {
		pinned = d.want(c)
	}
	return Entitlement(c, d.all.Size(), len(d.sorted), d.requested, pinned)
}

// hysteresis is step 1: hot after HotAfter saturated samples, normal after
// CoolAfter calm ones; a container without a usage sample keeps its state.
func (d decider) hysteresis(prev State, usage, stall map[string]float64) (State, []Transition) {
	next := State{}
	var transitions []Transition
	for _, c := range d.sorted {
		st := prev[c.ID]
		if u, seen := usage[c.ID]; seen {
			var t *Transition
			st, t = d.heat(c, st, u, stall[c.ID], d.entitlement(c, st.Dedicated.Size()))
			if t != nil {
				transitions = append(transitions, *t)
			}
		}
		next[c.ID] = st
	}
	return next, transitions
}

// heat counts one sample of usage u against entitlement e into c's
// streaks, and says when c turns hot or normal.
//
// A demoted container's own stall (the share of the interval its tasks
// waited for a CPU) counts as demand: on CPUs saturated by normal tenants
// its demotion starves it, its usage falls, and without this it would be
// taken for calm, undemoted after CoolAfter samples and turn hot again a
// few samples later, over and over (flapping, issue 36). A container that
// really went quiet stalls no more and cools as before.
func (d decider) heat(c Container, st ContainerState, u, ownStall, e float64) (ContainerState, *Transition) {
	p := d.p
	if !st.Hot {
		if st.HotStreak = streak(st.HotStreak, u >= p.HotThreshold*e); st.HotStreak < p.HotAfter {
			return st, nil
		}
		st.Hot, st.CalmStreak = true, 0
		return st, &Transition{c.ID, c.Name, true,
			fmt.Sprintf("used %.2f of its %.2f CPUs (>= %.0f%%) for %d samples", u, e, p.HotThreshold*100, st.HotStreak)}
	}
	demand := u
	if st.Demoted && ownStall > 0 {
		demand += min(ownStall, 1) * e // starved by its demotion, not calm
	}
	if st.CalmStreak = streak(st.CalmStreak, demand < p.CoolThreshold*e); st.CalmStreak < p.CoolAfter {
		return st, nil
	}
	st.Hot, st.HotStreak = false, 0
	return st, &Transition{c.ID, c.Name, false,
		fmt.Sprintf("used %.2f CPUs (< %.0f%% of its %.2f) for %d samples", u, p.CoolThreshold*100, e, st.CalmStreak)}
}

// streak is a run of samples n after one more: longer when the sample
// counts, else broken.
func streak(n int, counts bool) int {
	if counts {
		return n + 1
	}
	return 0
}

// pinning is where step 2 left the CPUs.
type pinning struct {
	reserved cpuset.CPUSet // the CPUs that always stay shared
	pool     cpuset.CPUSet // the CPUs no normal container owns (SharedPool)
	confine  cpuset.CPUSet // where strict confines a hot container
	refused  string        // why normal containers are not pinned, "" when they are
}

// dedicate is step 2: dedicated sets for normal containers, outside the
// reserved shared CPUs, only if every normal container gets its own: never
// more normal containers on a CPU than cpus_per_container allows (kubelet's
// static policy refuses rather than oversubscribe). It returns every
// container's dedicated set (empty for a hot one) and the shared pool.
func (d decider) dedicate(next State) (map[string]cpuset.CPUSet, pinning) {
	pin := pinning{reserved: reserveShared(d.top, d.p.MinShared)}
	avail := d.all.Difference(pin.reserved)
	dedicated := map[string]cpuset.CPUSet{}
	var normals []Container
	need := 0
	for _, c := range d.sorted {
		dedicated[c.ID] = cpuset.New()
		if !next[c.ID].Hot {
			normals = append(normals, c)
			need += d.want(c)
		}
	}
	if d.p.DemoteOnly {
		pin.refused = "demote only: the cpusets are not the controller's (a static CPU manager owns them)"
	} else if len(normals) > 0 && need > avail.Size() {
		pin.refused = fmt.Sprintf("%d normal container(s) need %d dedicated CPU(s), only %d outside the shared pool %s: not pinning rather than putting two on one CPU",
			len(normals), need, avail.Size(), pin.reserved)
	} else {
		d.assign(dedicated, next, normals, avail)
	}
	owned := cpuset.New()
	for _, c := range normals {
		owned = owned.Union(dedicated[c.ID])
	}
	pin.pool = d.all.Difference(owned)
	if pin.pool.IsEmpty() { // cannot happen with reserved CPUs, but never hand out an empty set
		pin.pool = d.all
	}
	pin.confine = pin.pool
	if owned.IsEmpty() {
		pin.confine = pin.reserved // nobody pinned: strict still keeps the hot ones off the rest
	}
	return dedicated, pin
}

// assign gives every normal container its CPUs in avail, which has enough
// for all: a still-valid previous set first, so that containers do not
// move, then free CPUs.
func (d decider) assign(dedicated map[string]cpuset.CPUSet, next State, normals []Container, avail cpuset.CPUSet) {
	owners := map[int]int{}
	placed := map[string]bool{}
	for _, c := range normals {
		prev := next[c.ID].Dedicated
		if prev.Size() == d.want(c) && prev.IsSubsetOf(avail) && free(prev, owners) {
			for _, cpu := range prev.List() {
				owners[cpu]++
			}
			dedicated[c.ID], placed[c.ID] = prev, true
		}
	}
	for _, c := range normals {
		if placed[c.ID] {
			continue
		}
		cpus, _ := takeFree(d.top, avail, owners, d.want(c)) // enough by the caller's count
		for _, cpu := range cpus.List() {
			owners[cpu]++
		}
		dedicated[c.ID] = cpus
	}
}

// demote is step 3: a hot container is demoted, with the stall gate only
// after StallAfter consecutive samples in which another (normal) container
// stalled, and undemoted after CoolAfter samples without.
func (d decider) demote(next State, stall map[string]float64) State {
	out := State{}
	for _, c := range d.sorted {
		out[c.ID] = d.demotion(next[c.ID], d.othersStall(next, stall, c.ID))
	}
	return out
}

// othersStall says whether a normal container other than except stalled.
func (d decider) othersStall(next State, stall map[string]float64, except string) bool {
	for _, c := range d.sorted {
		if c.ID != except && !next[c.ID].Hot && stall[c.ID] >= d.p.StallThreshold {
			return true
		}
	}
	return false
}

// demotion is one sample of the stall gate for one container.
func (d decider) demotion(st ContainerState, othersStall bool) ContainerState {
	p := d.p
	switch {
	case !st.Hot || !p.Demotes():
		st.Demoted, st.StallQuiet, st.StallStreak = false, 0, 0
	case !p.StallGate:
		st.Demoted = true
	case othersStall:
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
	return st
}

// place is step 4: what container c in state st should have now.
func (d decider) place(c Container, st ContainerState, pin pinning) Placement {
	p := d.p
	pl := Placement{ContainerID: c.ID, Name: c.Name, Hot: st.Hot, Demote: st.Demoted,
		Entitlement: d.entitlement(c, st.Dedicated.Size())}
	switch {
	case st.Hot && p.DemoteOnly:
		pl.Reason = "hot: keeps its CPUs (demote only)"
	case st.Hot && p.Policy == PolicyStrict:
		pl.CPUs, pl.Reason = pin.confine, "hot: confined to the shared pool"
	case st.Hot && p.Policy == PolicyPaper:
		pl.CPUs, pl.Reason = d.all, "hot: released to all CPUs"
	case st.Hot:
		pl.Reason = "hot: keeps its CPUs"
	case !st.Dedicated.IsEmpty():
		pl.CPUs, pl.Pinned, pl.Reason = st.Dedicated, true, "dedicated"
	case pin.refused != "" && p.Policy != PolicyShield:
		pl.Reason = "not pinned: " + pin.refused
	case pin.refused != "":
		pl.Reason = "normal: too few CPUs to dedicate, keeps its own"
	default:
		pl.Reason = "normal"
	}
	if pl.Demote {
		pl.Reason += "; demoted (idle class)"
	} else if st.Hot && p.Demotes() && p.StallGate {
		pl.Reason += "; not demoted: no other container stalls"
	}
	return pl
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
