package observe

import (
	"testing"

	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// BenchmarkSamplers measures one reading of each sampler on this machine's
// real /proc and /sys: the observer's overhead is their sum per interval.
func BenchmarkSamplers(b *testing.B) {
	for _, sm := range []sampler{
		newCPUSampler("/proc"),
		newMemorySampler("/proc"),
		newDiskSampler(kernel.DefaultFS(), nil, false),
		newInterruptSampler("/proc"),
		newSoftirqSampler("/proc"),
		newProcessSampler("/proc", DefaultProcessGroups()),
	} {
		b.Run(sm.name(), func(b *testing.B) {
			fail := func(string, error) {}
			for b.Loop() {
				var s results.Sample
				if err := sm.sample(1, &s, fail); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
