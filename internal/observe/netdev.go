package observe

import (
	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// netSampler computes each network interface's rates from /proc/net/dev,
// which shows the interfaces of the observer's network namespace: on a
// host of a plan's hosts:, that host's own (its NIC, docker0, the veths of
// its containers).
type netSampler struct {
	procRoot string
	prev     map[string]kernel.NetDev
}

func newNetSampler(procRoot string) *netSampler { return &netSampler{procRoot: procRoot} }

func (n *netSampler) name() string { return "net" }

func (n *netSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	devs, err := kernel.NetDevs(n.procRoot)
	if err != nil {
		return err
	}
	cur := make(map[string]kernel.NetDev, len(devs))
	for _, d := range devs {
		cur[d.Name] = d
	}
	if dt > 0 && n.prev != nil {
		s.Net = map[string]results.NetStats{}
		rate := func(a, b uint64) float64 {
			if b < a {
				return 0 // a counter reset (the interface went and came back)
			}
			return float64(b-a) / dt
		}
		for name, c := range cur {
			p, ok := n.prev[name]
			if !ok {
				continue
			}
			s.Net[name] = results.NetStats{RxBytesPerS: rate(p.RxBytes, c.RxBytes), TxBytesPerS: rate(p.TxBytes, c.TxBytes),
				RxPacketsPerS: rate(p.RxPackets, c.RxPackets), TxPacketsPerS: rate(p.TxPackets, c.TxPackets),
				DropsPerS: rate(p.RxDrops+p.TxDrops, c.RxDrops+c.TxDrops), ErrorsPerS: rate(p.RxErrors+p.TxErrors, c.RxErrors+c.TxErrors)}
		}
	}
	n.prev = cur
	return nil
}
