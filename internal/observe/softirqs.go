package observe

import (
	"fmt"
	"path/filepath"

	"github.com/prometheus/procfs"

	"ctrperf/internal/results"
)

// softirqSampler computes per-kind, per-CPU softirq rates from
// /proc/softirqs (NET_RX on the CPU that took the NIC interrupt, BLOCK on
// the CPU that completed the I/O).
type softirqSampler struct {
	procRoot string
	prev     map[string][]uint64
}

func newSoftirqSampler(procRoot string) *softirqSampler { return &softirqSampler{procRoot: procRoot} }

func (si *softirqSampler) name() string { return "softirqs" }

func (si *softirqSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	fs, err := procfs.NewFS(si.procRoot)
	if err != nil {
		return fmt.Errorf("open proc root %s: %w", si.procRoot, err)
	}
	st, err := fs.Softirqs()
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(si.procRoot, "softirqs"), err)
	}
	cur := map[string][]uint64{}
	for kind, counts := range map[string][]uint64{
		"HI": st.Hi, "TIMER": st.Timer, "NET_TX": st.NetTx, "NET_RX": st.NetRx,
		"BLOCK": st.Block, "IRQ_POLL": st.IRQPoll, "TASKLET": st.Tasklet,
		"SCHED": st.Sched, "HRTIMER": st.HRTimer, "RCU": st.RCU,
	} {
		if counts != nil {
			cur[kind] = counts
		}
	}
	if dt > 0 && si.prev != nil {
		// Every kind is kept, even idle ones: there are only ten.
		s.Softirqs = perCPURates(si.prev, cur, dt, false)
	}
	si.prev = cur
	return nil
}
