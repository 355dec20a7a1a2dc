package observe

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"ctrperf/internal/results"
)

// WriteText prints one sample the way a user reads iostat -x and mpstat in
// a second terminal: the all-CPU line, one line per device, the process
// groups that used CPU or exist (busiest first) and one line per container.
func WriteText(w io.Writer, s results.Sample) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if c, ok := s.CPU["all"]; ok {
		fmt.Fprintf(tw, "t=%.0fs\t%%usr\t%%nice\t%%sys\t%%iowait\t%%irq\t%%soft\t%%steal\t%%idle\tctxt/s\trunq\tblocked\t\n", s.T)
		fmt.Fprintf(tw, "all\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t\n",
			c.User, c.Nice, c.System, c.IOWait, c.IRQ, c.SoftIRQ, c.Steal, c.Idle, s.ContextSwitchesPerS, s.RunQueue, s.BlockedProcs)
	} else {
		fmt.Fprintf(tw, "t=%.0fs\t\n", s.T)
	}
	if len(s.Disks) > 0 {
		// iostat -x's columns as the seed printed them, less svctm
		// (deprecated, then removed, by sysstat).
		fmt.Fprintf(tw, "Device\trrqm/s\twrqm/s\tr/s\tw/s\trkB/s\twkB/s\tareq-sz\taqu-sz\tawait\tr_await\tw_await\t%%util\t\n")
		for _, name := range sortedKeys(s.Disks) {
			d := s.Disks[name]
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", name,
				d.ReadMergedPerS, d.WriteMergedPerS, d.ReadsPerS, d.WritesPerS, d.ReadKBPerS, d.WriteKBPerS,
				d.AvgRequestKB, d.AvgQueueSize, d.AwaitMs, d.ReadAwaitMs, d.WriteAwaitMs, d.UtilPercent)
		}
	}
	if groups := busiestGroups(s.Processes); len(groups) > 0 {
		fmt.Fprintf(tw, "Process group\t%%CPU\tcount\tRSS MiB\t\n")
		for _, name := range groups {
			p := s.Processes[name]
			fmt.Fprintf(tw, "%s\t%.1f\t%d\t%.1f\t\n", name, p.CPUPercent, p.Count, p.RSSBytes/(1<<20))
		}
	}
	if len(s.Containers) > 0 {
		fmt.Fprintf(tw, "Container\t%%CPU\tthrottled\tthrottled s\tmem MiB\trd kB/s\twr kB/s\tcswch/s\tnvcswch/s\t\n")
		for _, name := range sortedKeys(s.Containers) {
			c := s.Containers[name]
			fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.3f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t\n", name,
				c.CPUPercent, c.ThrottledPeriods, c.ThrottledS, c.MemBytes/(1<<20), c.BlkReadBPerS/1024, c.BlkWriteBPerS/1024,
				c.VoluntaryCtxSwPerS, c.InvoluntaryCtxSwPerS)
		}
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// WriteSummaryText prints a summary as the seed's "iostat maxima" tables:
// per figure the mean and, after the slash, the maximum.
func WriteSummaryText(w io.Writer, sum results.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	f := func(x results.Figure) string { return fmt.Sprintf("%.2f / %.2f", x.Mean, x.Max) }
	fmt.Fprintf(tw, "summary over %d samples (mean / max)\t%%usr\t%%sys\t%%iowait\t%%soft\t\n", sum.Samples)
	fmt.Fprintf(tw, "all CPUs\t%s\t%s\t%s\t%s\t\n", f(sum.CPU.User), f(sum.CPU.System), f(sum.CPU.IOWait), f(sum.CPU.SoftIRQ))
	if len(sum.Disks) > 0 {
		fmt.Fprintf(tw, "Device\twrqm/s\tw/s\twkB/s\tareq-sz\tawait\tw_await\t%%util\t\n")
		for _, name := range sortedKeys(sum.Disks) {
			d := sum.Disks[name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, f(d.WriteMergedPerS), f(d.WritesPerS), f(d.WriteKBPerS),
				f(d.AvgRequestKB), f(d.AwaitMs), f(d.WriteAwaitMs), f(d.UtilPercent))
		}
	}
	if len(sum.Processes) > 0 {
		fmt.Fprintf(tw, "Process group\t%%CPU\t\t\t\t\n")
		for _, name := range sortedKeys(sum.Processes) {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\n", name, f(sum.Processes[name].CPUPercent))
		}
	}
	if len(sum.Containers) > 0 {
		fmt.Fprintf(tw, "Container\t%%CPU\t\t\t\t\n")
		for _, name := range sortedKeys(sum.Containers) {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\n", name, f(sum.Containers[name].CPUPercent))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range sortedKeys(sum.Unavailable) {
		if _, err := fmt.Fprintf(w, "unavailable %s: %s\n", k, sum.Unavailable[k]); err != nil {
			return err
		}
	}
	return nil
}

// busiestGroups lists the groups that have processes or used CPU, busiest first.
func busiestGroups(ps map[string]results.ProcessStats) []string {
	var out []string
	for name, p := range ps {
		if p.Count > 0 || p.CPUPercent > 0 {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := ps[out[i]], ps[out[j]]
		if a.CPUPercent != b.CPUPercent {
			return a.CPUPercent > b.CPUPercent
		}
		return out[i] < out[j]
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
