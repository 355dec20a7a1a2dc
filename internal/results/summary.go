package results

import "math"

// Figure is the mean and the maximum of one figure over the samples that
// had it; N says how many did (0: the figure was never seen).
type Figure struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	N    int     `json:"n"`
}

func (f *Figure) add(v float64) {
	if f.N == 0 {
		f.Max = v
	} else {
		f.Max = math.Max(f.Max, v)
	}
	f.N++
	f.Mean += (v - f.Mean) / float64(f.N)
}

// DiskSummary are the iostat -x figures of one device over a run, as the
// seed's "iostat maxima" tables quote them.
type DiskSummary struct {
	ReadsPerS   Figure `json:"r_s"`
	WritesPerS  Figure `json:"w_s"`
	ReadKBPerS  Figure `json:"rkb_s"`
	WriteKBPerS Figure `json:"wkb_s"`
	// Await figures only count intervals that completed such requests: an
	// idle second has no waiting time, not a zero one.
	ReadAwaitMs  Figure `json:"r_await"`
	WriteAwaitMs Figure `json:"w_await"`
	AvgQueueSize Figure `json:"aqu_sz"`
	UtilPercent  Figure `json:"util"`
	// rrqm/s, wrqm/s; areq-sz and await over intervals with requests.
	ReadMergedPerS  Figure `json:"rrqm_s"`
	WriteMergedPerS Figure `json:"wrqm_s"`
	AvgRequestKB    Figure `json:"areq_sz"`
	AwaitMs         Figure `json:"await"`
}

// CPUSummary is the all-CPU split over a run, in percent.
type CPUSummary struct {
	User    Figure `json:"user"`
	System  Figure `json:"system"`
	IOWait  Figure `json:"iowait"`
	IRQ     Figure `json:"irq"`
	SoftIRQ Figure `json:"softirq"`
	Steal   Figure `json:"steal"`
	Idle    Figure `json:"idle"`
}

// ContainerSummary is one container's cgroup over a run.
type ContainerSummary struct {
	CPUPercent       Figure `json:"cpu_pct"`
	ThrottledPeriods Figure `json:"throttled_periods"`
	MemBytes         Figure `json:"mem_bytes"`
	BlkReadBPerS     Figure `json:"blk_read_b_s"`
	BlkWriteBPerS    Figure `json:"blk_write_b_s"`
	// Context switches per second of the container's threads.
	VoluntaryCtxSwPerS   Figure `json:"vol_ctxsw_s"`
	InvoluntaryCtxSwPerS Figure `json:"invol_ctxsw_s"`
}

// ProcessSummary is one process group over a run.
type ProcessSummary struct {
	CPUPercent Figure `json:"cpu_pct"`
	Count      Figure `json:"count"`
	RSSBytes   Figure `json:"rss_bytes"`
}

// Summary holds the key figures of a series, mean and max each.
type Summary struct {
	Samples             int                         `json:"samples"`
	IntervalS           float64                     `json:"interval_s"`
	CPU                 CPUSummary                  `json:"cpu"`
	Disks               map[string]DiskSummary      `json:"disks,omitempty"`
	Containers          map[string]ContainerSummary `json:"containers,omitempty"`
	Processes           map[string]ProcessSummary   `json:"processes,omitempty"`
	ContextSwitchesPerS Figure                      `json:"ctxt_per_s"`
	RunQueue            Figure                      `json:"runq"`
	MemUsedBytes        Figure                      `json:"mem_used_bytes"`
	Unavailable         map[string]string           `json:"unavailable,omitempty"`
}

// Summarize computes the mean and max of the key figures of a series. A nil
// series gives an empty summary.
func Summarize(s *Series) Summary {
	var out Summary
	if s == nil {
		return out
	}
	out.Samples, out.IntervalS, out.Unavailable = len(s.Samples), s.IntervalS, s.Unavailable
	for _, smp := range s.Samples {
		if c, ok := smp.CPU["all"]; ok {
			out.CPU.User.add(c.User)
			out.CPU.System.add(c.System)
			out.CPU.IOWait.add(c.IOWait)
			out.CPU.IRQ.add(c.IRQ)
			out.CPU.SoftIRQ.add(c.SoftIRQ)
			out.CPU.Steal.add(c.Steal)
			out.CPU.Idle.add(c.Idle)
			// Levels and system rates come from the same reading as the CPU.
			out.ContextSwitchesPerS.add(smp.ContextSwitchesPerS)
			out.RunQueue.add(smp.RunQueue)
		}
		if smp.MemUsedBytes > 0 {
			out.MemUsedBytes.add(smp.MemUsedBytes)
		}
		for name, d := range smp.Disks {
			if out.Disks == nil {
				out.Disks = map[string]DiskSummary{}
			}
			ds := out.Disks[name]
			ds.ReadsPerS.add(d.ReadsPerS)
			ds.WritesPerS.add(d.WritesPerS)
			ds.ReadKBPerS.add(d.ReadKBPerS)
			ds.WriteKBPerS.add(d.WriteKBPerS)
			if d.ReadsPerS > 0 {
				ds.ReadAwaitMs.add(d.ReadAwaitMs)
			}
			if d.WritesPerS > 0 {
				ds.WriteAwaitMs.add(d.WriteAwaitMs)
			}
			ds.AvgQueueSize.add(d.AvgQueueSize)
			ds.UtilPercent.add(d.UtilPercent)
			// A sample with requests but no request size was recorded
			// before ctrperf kept merges, areq-sz and await: those figures
			// are unknown there, not zero.
			legacy := d.ReadsPerS+d.WritesPerS > 0 && d.AvgRequestKB == 0
			if !legacy {
				ds.ReadMergedPerS.add(d.ReadMergedPerS)
				ds.WriteMergedPerS.add(d.WriteMergedPerS)
			}
			if d.ReadsPerS+d.WritesPerS > 0 && !legacy {
				ds.AvgRequestKB.add(d.AvgRequestKB)
				ds.AwaitMs.add(d.AwaitMs)
			}
			out.Disks[name] = ds
		}
		for name, c := range smp.Containers {
			if out.Containers == nil {
				out.Containers = map[string]ContainerSummary{}
			}
			cs := out.Containers[name]
			cs.CPUPercent.add(c.CPUPercent)
			cs.ThrottledPeriods.add(c.ThrottledPeriods)
			cs.MemBytes.add(c.MemBytes)
			cs.BlkReadBPerS.add(c.BlkReadBPerS)
			cs.BlkWriteBPerS.add(c.BlkWriteBPerS)
			cs.VoluntaryCtxSwPerS.add(c.VoluntaryCtxSwPerS)
			cs.InvoluntaryCtxSwPerS.add(c.InvoluntaryCtxSwPerS)
			out.Containers[name] = cs
		}
		for name, p := range smp.Processes {
			if out.Processes == nil {
				out.Processes = map[string]ProcessSummary{}
			}
			ps := out.Processes[name]
			ps.CPUPercent.add(p.CPUPercent)
			ps.Count.add(float64(p.Count))
			ps.RSSBytes.add(p.RSSBytes)
			out.Processes[name] = ps
		}
	}
	return out
}
