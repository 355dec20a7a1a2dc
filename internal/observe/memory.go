package observe

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/prometheus/procfs"

	"ctrperf/internal/results"
)

// memorySampler reads memory levels from /proc/meminfo.
type memorySampler struct{ procRoot string }

func newMemorySampler(procRoot string) *memorySampler { return &memorySampler{procRoot: procRoot} }

func (m *memorySampler) name() string { return "memory" }

func (m *memorySampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	fs, err := procfs.NewFS(m.procRoot)
	if err != nil {
		return fmt.Errorf("open proc root %s: %w", m.procRoot, err)
	}
	mi, err := fs.Meminfo()
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(m.procRoot, "meminfo"), err)
	}
	if mi.MemTotalBytes == nil || mi.MemAvailableBytes == nil {
		return errors.New("meminfo has no MemTotal or MemAvailable (kernel before 3.14?)")
	}
	if dt > 0 {
		// "Used" as free(1) shows it since procps 4: what is not available.
		s.MemUsedBytes = float64(*mi.MemTotalBytes - *mi.MemAvailableBytes)
		s.MemAvailableBytes = float64(*mi.MemAvailableBytes)
	}
	return nil
}
