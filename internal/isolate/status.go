package isolate

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Status is what `ctrperf isolate status` shows.
type Status struct {
	Time       time.Time         `json:"time"`
	PID        int               `json:"pid"`
	Policy     Policy            `json:"policy"`
	DryRun     bool              `json:"dry_run"`
	SharedPool string            `json:"shared_pool"`
	PinRefused string            `json:"pin_refused,omitempty"`
	Containers []ContainerStatus `json:"containers"`
	IRQs       map[int]int       `json:"irqs,omitempty"`
	Skipped    map[int]string    `json:"irqs_skipped,omitempty"`
	RPS        map[string]string `json:"rps,omitempty"`
	// StepCPUSeconds is the CPU time the control steps used so far.
	StepCPUSeconds float64 `json:"step_cpu_s"`
	// Recent are the last decisions (RecentEvents of them), oldest first.
	Recent []Event `json:"recent,omitempty"`
	// DemoteOnly: no cpuset is the controller's (a static CPU manager's node).
	DemoteOnly bool `json:"demote_only,omitempty"`
}

// ContainerStatus is one row of the placement table.
type ContainerStatus struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	CPUs        string  `json:"cpus"` // "" = its own
	Pinned      bool    `json:"pinned"`
	Hot         bool    `json:"hot"`
	Demoted     bool    `json:"demoted"`
	Usage       float64 `json:"usage_cpus"`
	Entitlement float64 `json:"entitlement_cpus"`
	Stall       float64 `json:"stall"` // fraction of the last interval its tasks waited for a CPU
	Reason      string  `json:"reason"`
}

// Status returns the current placement table.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Time: c.clock(), PID: os.Getpid(), Policy: c.cfg.Params.Policy, DryRun: c.cfg.DryRun,
		SharedPool: c.decision.SharedPool.String(), PinRefused: c.decision.PinRefused,
		IRQs: map[int]int{}, Skipped: map[int]string{}, RPS: map[string]string{}, StepCPUSeconds: c.stepCPU.Seconds()}
	for id, pl := range c.decision.Placements {
		_, demoted := c.state.classes.applied[id]
		s.Containers = append(s.Containers, ContainerStatus{ID: id, Name: pl.Name, CPUs: pl.CPUs.String(), Pinned: pl.Pinned, Hot: pl.Hot,
			Demoted: demoted, Usage: c.sample.usage[id], Entitlement: pl.Entitlement, Stall: c.sample.stall[id], Reason: pl.Reason})
	}
	sort.Slice(s.Containers, func(i, j int) bool { return s.Containers[i].Name < s.Containers[j].Name })
	for k, v := range c.state.irqs.applied {
		irq, _ := strconv.Atoi(k)
		s.IRQs[irq], _ = strconv.Atoi(v)
	}
	for k, v := range c.irqs.skipped {
		s.Skipped[k] = v
	}
	for k, v := range c.rps.masked {
		s.RPS[k] = v
	}
	s.DemoteOnly = c.cfg.Params.DemoteOnly
	c.recentMu.Lock()
	s.Recent = slices.Clone(c.recent)
	c.recentMu.Unlock()
	return s
}
