package report

import (
	"math"
	"sort"

	"ctrperf/internal/results"
)

// summarizeSystem computes the mean and maximum of the observers' key figures
// over every sample of every successful run, like the seed's iostat maxima.
// Each run is summarised by results.Summarize; runs are then combined with
// sample-weighted means. Devices, containers and processes that did nothing
// are left out.
func summarizeSystem(ok []runData) []SystemFigure {
	type key struct{ group, subject, figure, unit string }
	accs := map[key]*results.Figure{}
	add := func(group, subject, figure, unit string, f results.Figure) {
		if f.N == 0 || math.IsNaN(f.Mean) {
			return
		}
		k := key{group, subject, figure, unit}
		a := accs[k]
		if a == nil {
			accs[k] = &results.Figure{Mean: f.Mean, Max: f.Max, N: f.N}
			return
		}
		n := a.N + f.N
		a.Mean = (a.Mean*float64(a.N) + f.Mean*float64(f.N)) / float64(n)
		a.Max = math.Max(a.Max, f.Max)
		a.N = n
	}
	for _, d := range ok {
		if d.rec.System == nil {
			continue
		}
		sum := results.Summarize(d.rec.System)
		add("cpu", "all", "user", "%", sum.CPU.User)
		add("cpu", "all", "system", "%", sum.CPU.System)
		add("cpu", "all", "iowait", "%", sum.CPU.IOWait)
		add("cpu", "all", "softirq", "%", sum.CPU.SoftIRQ)
		if sum.CPU.User.N > 0 {
			add("system", "all", "ctxt/s", "/s", sum.ContextSwitchesPerS)
			add("system", "all", "runq", "", sum.RunQueue)
		}
		// The seed's iostat -x columns (svctm aside: sysstat deprecated
		// and then removed it, so ctrperf does not invent it).
		for dev, ds := range sum.Disks {
			add("disk", dev, "rrqm/s", "/s", ds.ReadMergedPerS)
			add("disk", dev, "wrqm/s", "/s", ds.WriteMergedPerS)
			add("disk", dev, "r/s", "/s", ds.ReadsPerS)
			add("disk", dev, "w/s", "/s", ds.WritesPerS)
			add("disk", dev, "rkB/s", "kB/s", ds.ReadKBPerS)
			add("disk", dev, "wkB/s", "kB/s", ds.WriteKBPerS)
			add("disk", dev, "areq-sz", "kB", ds.AvgRequestKB)
			add("disk", dev, "aqu-sz", "", ds.AvgQueueSize)
			add("disk", dev, "await", "ms", ds.AwaitMs)
			add("disk", dev, "r_await", "ms", ds.ReadAwaitMs)
			add("disk", dev, "w_await", "ms", ds.WriteAwaitMs)
			add("disk", dev, "util", "%", ds.UtilPercent)
		}
		for name, cs := range sum.Containers {
			add("container", name, "cpu", "%", cs.CPUPercent)
			// Context switches of the container's threads (seed 003's
			// UnixBench question), where the sampler could count them.
			if cs.VoluntaryCtxSwPerS.Max > 0 || cs.InvoluntaryCtxSwPerS.Max > 0 {
				add("container", name, "vol ctxsw/s", "/s", cs.VoluntaryCtxSwPerS)
				add("container", name, "invol ctxsw/s", "/s", cs.InvoluntaryCtxSwPerS)
			}
		}
		for name, ps := range sum.Processes {
			add("process", name, "cpu", "%", ps.CPUPercent)
		}
	}
	// A subject whose every figure stayed at zero is noise in a table.
	active := map[[2]string]bool{}
	for k, a := range accs {
		if a.Max > 0 || k.group == "cpu" {
			active[[2]string{k.group, k.subject}] = true
		}
	}
	var out []SystemFigure
	for k, a := range accs {
		if !active[[2]string{k.group, k.subject}] {
			continue
		}
		out = append(out, SystemFigure{Group: k.group, Subject: k.subject, Figure: k.figure, Unit: k.unit, Mean: a.Mean, Max: a.Max})
	}
	rank := map[string]int{"cpu": 0, "system": 1, "disk": 2, "container": 3, "process": 4}
	figRank := map[string]int{"user": 0, "system": 1, "iowait": 2, "softirq": 3,
		"ctxt/s": 0, "runq": 1, "cpu": 0, "vol ctxsw/s": 1, "invol ctxsw/s": 2,
		"rrqm/s": 0, "wrqm/s": 1, "r/s": 2, "w/s": 3, "rkB/s": 4, "wkB/s": 5, "areq-sz": 6, "aqu-sz": 7, "await": 8, "r_await": 9, "w_await": 10, "util": 11}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return rank[a.Group] < rank[b.Group]
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return figRank[a.Figure] < figRank[b.Figure]
	})
	return out
}

// timeline is one named series of (t, value) points for a plot.
type timeline struct {
	Name string
	T, V []float64
}

// cpuTimelines are per-CPU utilisation (100 - idle) over a run.
func cpuTimelines(s *results.Series) []timeline {
	if s == nil {
		return nil
	}
	byCPU := map[string]*timeline{}
	for _, smp := range s.Samples {
		for name, c := range smp.CPU {
			if name == "all" {
				continue
			}
			tl := byCPU[name]
			if tl == nil {
				tl = &timeline{Name: name}
				byCPU[name] = tl
			}
			tl.T = append(tl.T, smp.T)
			tl.V = append(tl.V, math.Max(0, 100-c.Idle))
		}
	}
	return sortedTimelines(byCPU)
}

// diskTimelines are writes per second per active device over a run.
func diskTimelines(s *results.Series) []timeline {
	if s == nil {
		return nil
	}
	byDev := map[string]*timeline{}
	active := map[string]bool{}
	for _, smp := range s.Samples {
		for dev, d := range smp.Disks {
			tl := byDev[dev]
			if tl == nil {
				tl = &timeline{Name: dev}
				byDev[dev] = tl
			}
			tl.T = append(tl.T, smp.T)
			tl.V = append(tl.V, d.WritesPerS)
			if d.WritesPerS > 0 {
				active[dev] = true
			}
		}
	}
	for dev := range byDev {
		if !active[dev] {
			delete(byDev, dev)
		}
	}
	return sortedTimelines(byDev)
}

func sortedTimelines(m map[string]*timeline) []timeline {
	var out []timeline
	for _, k := range sortedKeys(m) {
		out = append(out, *m[k])
	}
	// cpu10 after cpu9: natural order for numbered names
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Name) != len(out[j].Name) {
			return len(out[i].Name) < len(out[j].Name)
		}
		return out[i].Name < out[j].Name
	})
	return out
}
