package observe

import (
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/procfs/blockdevice"

	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// diskSampler computes iostat -x figures from /proc/diskstats deltas.
type diskSampler struct {
	kernel     kernel.FS
	devices    map[string]bool // empty: all whole devices with I/O
	partitions bool
	prev       map[string]blockdevice.IOStats
}

func newDiskSampler(fs kernel.FS, devices []string, partitions bool) *diskSampler {
	d := &diskSampler{kernel: fs, partitions: partitions}
	if len(devices) > 0 {
		d.devices = map[string]bool{}
		for _, n := range devices {
			d.devices[n] = true
		}
	}
	return d
}

func (d *diskSampler) name() string { return "disk" }

func (d *diskSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	stats, err := diskstats(d.kernel)
	if err != nil {
		return err
	}
	// Every device's counters are kept so that one whose first I/O falls in
	// this interval still gets its delta; only reporting is filtered.
	cur := make(map[string]blockdevice.IOStats, len(stats))
	for _, st := range stats {
		cur[st.DeviceName] = st.IOStats
	}
	if dt > 0 {
		for _, st := range stats {
			if !d.keep(st) {
				continue
			}
			name, c := st.DeviceName, st.IOStats
			p, ok := d.prev[name]
			if !ok {
				continue // appeared during the interval: no delta yet
			}
			ds, ok := iostatX(p, c, dt)
			if !ok {
				continue // counters went backwards (device re-created)
			}
			if s.Disks == nil {
				s.Disks = map[string]results.DiskStats{}
			}
			s.Disks[name] = ds
		}
	}
	d.prev = cur
	return nil
}

// keep decides whether a device is reported: named devices always; else
// whole devices (those with an entry in /sys/block, which is how iostat tells
// them from partitions) or every device with partitions on, and only once
// they have done some I/O since boot, as iostat hides never-used loop devices.
func (d *diskSampler) keep(st blockdevice.Diskstats) bool {
	if d.devices != nil {
		return d.devices[st.DeviceName]
	}
	if st.ReadIOs+st.WriteIOs+st.DiscardIOs == 0 {
		return false
	}
	if d.partitions {
		return true
	}
	_, err := os.Stat(d.kernel.Sys("block", st.DeviceName))
	return err == nil
}

// iostatX computes the iostat -x columns from two readings dt seconds apart,
// with the same formulas as sysstat: rates are deltas over the interval,
// await is the time spent by the completed requests divided by their count,
// aqu-sz is the weighted time in queue over the interval, %util the time the
// device had requests in flight over the interval (clamped at 100, because the
// kernel's and our clock's notions of the interval differ slightly). ok is
// false when a counter went backwards.
func iostatX(prev, cur blockdevice.IOStats, dt float64) (results.DiskStats, bool) {
	if cur.ReadIOs < prev.ReadIOs || cur.WriteIOs < prev.WriteIOs ||
		cur.ReadSectors < prev.ReadSectors || cur.WriteSectors < prev.WriteSectors ||
		cur.ReadTicks < prev.ReadTicks || cur.WriteTicks < prev.WriteTicks ||
		cur.IOsTotalTicks < prev.IOsTotalTicks || cur.WeightedIOTicks < prev.WeightedIOTicks {
		return results.DiskStats{}, false
	}
	rIOs := float64(cur.ReadIOs - prev.ReadIOs)
	wIOs := float64(cur.WriteIOs - prev.WriteIOs)
	ds := results.DiskStats{
		ReadsPerS:    rIOs / dt,
		WritesPerS:   wIOs / dt,
		ReadKBPerS:   float64(cur.ReadSectors-prev.ReadSectors) / 2 / dt, // 512-byte sectors
		WriteKBPerS:  float64(cur.WriteSectors-prev.WriteSectors) / 2 / dt,
		AvgQueueSize: float64(cur.WeightedIOTicks-prev.WeightedIOTicks) / 1000 / dt,
		UtilPercent:  min(100, float64(cur.IOsTotalTicks-prev.IOsTotalTicks)/10/dt),
	}
	// Merge counters are checked apart: a device that does not merge
	// (some virtual ones) keeps them at 0, never backwards.
	if cur.ReadMerges >= prev.ReadMerges && cur.WriteMerges >= prev.WriteMerges {
		ds.ReadMergedPerS = float64(cur.ReadMerges-prev.ReadMerges) / dt
		ds.WriteMergedPerS = float64(cur.WriteMerges-prev.WriteMerges) / dt
	}
	if n := rIOs + wIOs; n > 0 {
		// sysstat: areq-sz = sectors of reads and writes / 2 / requests (kB);
		// await = their ticks / requests. Discards are left out of both.
		ds.AvgRequestKB = float64(cur.ReadSectors-prev.ReadSectors+cur.WriteSectors-prev.WriteSectors) / 2 / n
		ds.AwaitMs = float64(cur.ReadTicks-prev.ReadTicks+cur.WriteTicks-prev.WriteTicks) / n
	}
	if rIOs > 0 {
		ds.ReadAwaitMs = float64(cur.ReadTicks-prev.ReadTicks) / rIOs
	}
	if wIOs > 0 {
		ds.WriteAwaitMs = float64(cur.WriteTicks-prev.WriteTicks) / wIOs
	}
	return ds, true
}

// diskstats reads <proc>/diskstats through procfs' blockdevice reader.
func diskstats(k kernel.FS) ([]blockdevice.Diskstats, error) {
	fs, err := blockdevice.NewFS(k.Proc(), k.Sys())
	if err != nil {
		return nil, fmt.Errorf("open block device statistics under %s and %s: %w", k.Proc(), k.Sys(), err)
	}
	stats, err := fs.ProcDiskstats()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Proc("diskstats"), err)
	}
	return stats, nil
}

// Devices lists the block devices of the diskstats under k's proc root
// (whole devices and partitions, every one `observe --devices` may name),
// sorted.
func Devices(k kernel.FS) ([]string, error) {
	stats, err := diskstats(k)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(stats))
	for _, st := range stats {
		names = append(names, st.DeviceName)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
