package isolate

import (
	"context"
	"time"
)

// sampler turns the containers' cumulative CPU and stall times into rates
// over the interval since each one's previous sample.
type sampler struct {
	usage UsageReader
	stall StallReader // nil: no pressure
	last  map[string]cpuSample
}

type cpuSample struct {
	cpu, stall time.Duration
	hasStall   bool
	at         time.Time
}

// sample is one step's reading of the managed containers.
type sample struct {
	containers []Container
	live       map[string]bool
	// usage and stall: CPUs used and the fraction of the interval stalled,
	// for the containers with a previous sample.
	usage, stall map[string]float64
	from         map[string]time.Time // start of the interval each usage covers
}

func newSampler(usage UsageReader) *sampler {
	return &sampler{usage: usage, last: map[string]cpuSample{}}
}

// sample reads every container at the step's start. A container whose CPU
// time cannot be read (it may be stopping) has no usage this time and
// keeps its streaks.
func (s *sampler) sample(ctx context.Context, ms []Managed, at time.Time) sample {
	out := sample{live: map[string]bool{}, usage: map[string]float64{}, stall: map[string]float64{}, from: map[string]time.Time{}}
	for _, m := range ms {
		out.live[m.ID] = true
		out.containers = append(out.containers, Container{ID: m.ID, Name: m.Name, CPUs: m.CPUs, Request: m.Request})
		t, err := s.usage.CPUTime(ctx, m)
		if err != nil {
			continue
		}
		cur := cpuSample{cpu: t, at: at}
		if s.stall != nil {
			if st, err := s.stall.Stall(ctx, m); err == nil {
				cur.stall, cur.hasStall = st, true
			}
		}
		if p, ok := s.last[m.ID]; ok && at.After(p.at) && t >= p.cpu {
			dt := at.Sub(p.at).Seconds()
			out.usage[m.ID] = (t - p.cpu).Seconds() / dt
			out.from[m.ID] = p.at
			if cur.hasStall && p.hasStall && cur.stall >= p.stall {
				out.stall[m.ID] = (cur.stall - p.stall).Seconds() / dt
			}
		}
		s.last[m.ID] = cur
	}
	return out
}

// known are the containers with a sample.
func (s *sampler) known() []string {
	ids := make([]string, 0, len(s.last))
	for id := range s.last {
		ids = append(ids, id)
	}
	return ids
}

func (s *sampler) forget(id string) {
	delete(s.last, id)
	if f, ok := s.usage.(interface{ forgetFiles(string) }); ok {
		f.forgetFiles(id)
	}
}
