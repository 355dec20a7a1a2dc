package isolate

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// Policy says where a hot container goes.
type Policy string

const (
	// PolicyPaper releases a hot container to every CPU, as the paper did:
	// it keeps most of its throughput, quiet containers keep their own CPUs.
	PolicyPaper Policy = "paper"
	// PolicyStrict confines a hot container to the shared pool (the CPUs no
	// normal container owns), so quiet containers have their CPUs to
	// themselves.
	PolicyStrict Policy = "strict"
)

// Params tune the policy. Zero values take the defaults of DefaultParams.
type Params struct {
	Policy           Policy
	CPUsPerContainer int     // dedicated CPUs per normal container (a container may ask for its own count)
	MinShared        int     // CPUs always kept in the shared pool (rounded up to whole cores); at least 1
	HotThreshold     float64 // a container is saturated when it uses >= this fraction of its dedicated capacity
	CoolThreshold    float64 // a hot container is calm when it uses < this fraction of the capacity it asks for
	HotAfter         int     // consecutive saturated samples before it turns hot
	CoolAfter        int     // consecutive calm samples before it turns normal again
}

// DefaultParams are the defaults: one dedicated CPU each, one shared CPU,
// hot after 3 saturated samples at 90 %, normal again after 5 calm samples
// under 50 %.
func DefaultParams() Params {
	return Params{Policy: PolicyPaper, CPUsPerContainer: 1, MinShared: 1, HotThreshold: 0.9, CoolThreshold: 0.5, HotAfter: 3, CoolAfter: 5}
}

func (p Params) withDefaults() Params {
	d := DefaultParams()
	if p.Policy == "" {
		p.Policy = d.Policy
	}
	if p.CPUsPerContainer <= 0 {
		p.CPUsPerContainer = d.CPUsPerContainer
	}
	if p.MinShared <= 0 {
		p.MinShared = d.MinShared
	}
	if p.HotThreshold <= 0 {
		p.HotThreshold = d.HotThreshold
	}
	if p.CoolThreshold <= 0 {
		p.CoolThreshold = d.CoolThreshold
	}
	if p.HotAfter <= 0 {
		p.HotAfter = d.HotAfter
	}
	if p.CoolAfter <= 0 {
		p.CoolAfter = d.CoolAfter
	}
	return p
}

// Validate reports parameters that cannot work.
func (p Params) Validate() error {
	p = p.withDefaults()
	switch p.Policy {
	case PolicyPaper, PolicyStrict:
	default:
		return fmt.Errorf("unknown policy %q: want %q or %q", p.Policy, PolicyPaper, PolicyStrict)
	}
	if p.HotThreshold > 1.5 {
		return fmt.Errorf("hot threshold %.2f is above 1.5: a container can hardly use more than its CPUs", p.HotThreshold)
	}
	if p.CoolThreshold >= p.HotThreshold {
		return fmt.Errorf("cool threshold %.2f must be below hot threshold %.2f, or containers would flap", p.CoolThreshold, p.HotThreshold)
	}
	return nil
}

// Container is a managed container as the policy sees it.
type Container struct {
	ID   string
	Name string
	CPUs int // dedicated CPUs it asks for (label); 0 = Params.CPUsPerContainer
}

// ContainerState is what the policy remembers of a container between samples.
type ContainerState struct {
	Hot        bool          `json:"hot"`
	Dedicated  cpuset.CPUSet `json:"-"`
	HotStreak  int           `json:"hot_streak"`
	CalmStreak int           `json:"calm_streak"`
	// Shared is true when the machine had too few CPUs and this container's
	// dedicated set overlaps another's.
	Shared bool `json:"shared"`
}

// State is the policy's memory, keyed by container id.
type State map[string]ContainerState

// Placement is the cpuset a container should have now.
type Placement struct {
	ContainerID string
	Name        string
	CPUs        cpuset.CPUSet
	Hot         bool
	Shared      bool
	Reason      string
}

// Decision is the outcome of one policy step.
type Decision struct {
	State      State
	Placements map[string]Placement
	// SharedPool: CPUs no normal container owns. Never empty. Network IRQs
	// and the RPS of container veths go here.
	SharedPool cpuset.CPUSet
	// Oversubscribed: more CPUs were asked for than the machine has outside
	// the shared pool, so some dedicated sets are shared.
	Oversubscribed bool
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

// Decide computes the desired placement of every managed container from the
// topology, the previous state and the CPU each container used during the
// last interval (in CPUs: 1.0 = one CPU fully busy). It is a pure function.
func Decide(top Topology, params Params, prev State, containers []Container, usage map[string]float64) Decision {
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

	next := State{}
	var transitions []Transition
	// 1. Hysteresis: hot after HotAfter saturated samples, normal after CoolAfter calm ones.
	for _, c := range sorted {
		st := prev[c.ID]
		u, seen := usage[c.ID]
		if seen {
			if !st.Hot {
				capacity := float64(want(c))
				if n := st.Dedicated.Size(); n > 0 && n < want(c) {
					capacity = float64(n)
				}
				if u >= p.HotThreshold*capacity {
					st.HotStreak++
				} else {
					st.HotStreak = 0
				}
				if st.HotStreak >= p.HotAfter {
					st.Hot, st.CalmStreak = true, 0
					transitions = append(transitions, Transition{c.ID, c.Name, true,
						fmt.Sprintf("used %.2f of %.0f CPUs (>= %.0f%%) for %d samples", u, capacity, p.HotThreshold*100, st.HotStreak)})
				}
			} else {
				if u < p.CoolThreshold*float64(want(c)) {
					st.CalmStreak++
				} else {
					st.CalmStreak = 0
				}
				if st.CalmStreak >= p.CoolAfter {
					st.Hot, st.HotStreak = false, 0
					transitions = append(transitions, Transition{c.ID, c.Name, false,
						fmt.Sprintf("used %.2f CPUs (< %.0f%% of %d) for %d samples", u, p.CoolThreshold*100, want(c), st.CalmStreak)})
				}
			}
		}
		next[c.ID] = st
	}

	// 2. Dedicated sets for normal containers, outside the reserved shared CPUs.
	reserved := reserveShared(top, p.MinShared)
	avail := all.Difference(reserved)
	owners := map[int]int{} // cpu -> number of normal containers owning it
	var normals []Container
	for _, c := range sorted {
		if st := next[c.ID]; st.Hot {
			st.Dedicated, st.Shared = cpuset.New(), false
			next[c.ID] = st
			continue
		}
		normals = append(normals, c)
	}
	// Keep a still-valid previous set so that containers do not move.
	placed := map[string]bool{}
	for _, c := range normals {
		st := next[c.ID]
		d := st.Dedicated
		if d.Size() == want(c) && d.IsSubsetOf(avail) && !st.Shared && free(d, owners) {
			for _, cpu := range d.List() {
				owners[cpu]++
			}
			placed[c.ID] = true
		}
	}
	oversub := false
	for _, c := range normals {
		if placed[c.ID] {
			continue
		}
		st := next[c.ID]
		d, ok := takeFree(top, avail, owners, want(c))
		if !ok {
			d = takeLeastShared(avail, owners, want(c))
			oversub = true
		}
		for _, cpu := range d.List() {
			owners[cpu]++
		}
		st.Dedicated = d
		next[c.ID] = st
	}
	// Mark every set that overlaps another as shared, so the report can say so.
	for _, c := range normals {
		st := next[c.ID]
		st.Shared = false
		for _, cpu := range st.Dedicated.List() {
			if owners[cpu] > 1 {
				st.Shared = true
			}
		}
		next[c.ID] = st
	}

	owned := cpuset.New()
	for _, c := range normals {
		owned = owned.Union(next[c.ID].Dedicated)
	}
	pool := all.Difference(owned)
	if pool.IsEmpty() { // cannot happen with reserved CPUs, but never hand out an empty set
		pool = all
	}

	placements := map[string]Placement{}
	for _, c := range sorted {
		st := next[c.ID]
		pl := Placement{ContainerID: c.ID, Name: c.Name, Hot: st.Hot, Shared: st.Shared}
		switch {
		case st.Hot && p.Policy == PolicyStrict:
			pl.CPUs, pl.Reason = pool, "hot: confined to the shared pool"
		case st.Hot:
			pl.CPUs, pl.Reason = all, "hot: released to all CPUs"
		case st.Dedicated.IsEmpty():
			pl.CPUs, pl.Reason = pool, "no CPU left to dedicate: shared pool"
		case st.Shared:
			pl.CPUs, pl.Reason = st.Dedicated, "dedicated (shared with another container: too few CPUs)"
		default:
			pl.CPUs, pl.Reason = st.Dedicated, "dedicated"
		}
		placements[c.ID] = pl
	}
	return Decision{State: next, Placements: placements, SharedPool: pool, Oversubscribed: oversub, Transitions: transitions}
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

// takeLeastShared takes the n CPUs of avail with the fewest owners: the
// fairest way to share when there are more containers than CPUs.
func takeLeastShared(avail cpuset.CPUSet, owners map[int]int, n int) cpuset.CPUSet {
	cpus := avail.List()
	if len(cpus) == 0 {
		return cpuset.New()
	}
	sort.SliceStable(cpus, func(i, j int) bool { return owners[cpus[i]] < owners[cpus[j]] })
	if n > len(cpus) {
		n = len(cpus)
	}
	return cpuset.New(cpus[:n]...)
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
