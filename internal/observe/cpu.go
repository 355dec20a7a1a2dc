package observe

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/prometheus/procfs"

	"ctrperf/internal/results"
)

// cpuSampler computes mpstat figures per CPU and for all CPUs, the context
// switch rate and the run queue from /proc/stat.
type cpuSampler struct {
	procRoot string
	prev     *procfs.Stat
}

func newCPUSampler(procRoot string) *cpuSampler { return &cpuSampler{procRoot: procRoot} }

func (c *cpuSampler) name() string { return "cpu" }

func (c *cpuSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	fs, err := procfs.NewFS(c.procRoot)
	if err != nil {
		return fmt.Errorf("open proc root %s: %w", c.procRoot, err)
	}
	st, err := fs.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(c.procRoot, "stat"), err)
	}
	// Levels need no previous reading.
	s.RunQueue = float64(st.ProcessesRunning)
	s.BlockedProcs = float64(st.ProcessesBlocked)
	if dt > 0 && c.prev != nil {
		s.CPU = make(map[string]results.CPUPercent, len(st.CPU)+1)
		s.CPU["all"] = cpuPercent(c.prev.CPUTotal, st.CPUTotal)
		for id, cur := range st.CPU {
			if p, ok := c.prev.CPU[id]; ok {
				s.CPU["cpu"+strconv.FormatInt(id, 10)] = cpuPercent(p, cur)
			}
		}
		if st.ContextSwitches >= c.prev.ContextSwitches {
			s.ContextSwitchesPerS = float64(st.ContextSwitches-c.prev.ContextSwitches) / dt
		}
	}
	c.prev = &st
	return nil
}

// cpuPercent splits the time between two readings of one CPU as mpstat does,
// in percent of the time that passed on that CPU. Guest time is already
// part of user (and guest_nice of nice) in /proc/stat, so it is not added
// again. A field that went backwards (iowait can on idle CPUs) counts as 0.
func cpuPercent(prev, cur procfs.CPUStat) results.CPUPercent {
	d := func(a, b float64) float64 { return max(0, b-a) }
	user, nice, sys := d(prev.User, cur.User), d(prev.Nice, cur.Nice), d(prev.System, cur.System)
	idle, iowait := d(prev.Idle, cur.Idle), d(prev.Iowait, cur.Iowait)
	irq, soft, steal := d(prev.IRQ, cur.IRQ), d(prev.SoftIRQ, cur.SoftIRQ), d(prev.Steal, cur.Steal)
	total := user + nice + sys + idle + iowait + irq + soft + steal
	if total == 0 {
		return results.CPUPercent{}
	}
	pct := func(v float64) float64 { return 100 * v / total }
	return results.CPUPercent{
		User: pct(user), Nice: pct(nice), System: pct(sys), IOWait: pct(iowait),
		IRQ: pct(irq), SoftIRQ: pct(soft), Steal: pct(steal), Idle: pct(idle),
	}
}
