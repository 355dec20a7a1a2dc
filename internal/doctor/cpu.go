package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"
)

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

func collectCPU(_ context.Context, o options, f *Facts) error {
	cpu := o.kernel.Sys("devices", "system", "cpu")
	online, err := readTrim(filepath.Join(cpu, "online"))
	if err != nil {
		return fmt.Errorf("read online CPUs: %w", err)
	}
	set, err := cpuset.Parse(online)
	if err != nil {
		return fmt.Errorf("parse online CPUs %q: %w", online, err)
	}
	f.CPU.Online, f.CPU.Count = online, set.Size()

	// No node directory means a kernel without NUMA: one node.
	f.CPU.NUMANodes = 1
	if nodes, err := readTrim(o.kernel.Sys("devices", "system", "node", "online")); err == nil {
		if s, err := cpuset.Parse(nodes); err == nil && s.Size() > 0 {
			f.CPU.NUMANodes = s.Size()
		}
	}
	f.CPU.SMT, _ = readTrim(filepath.Join(cpu, "smt", "control"))
	f.CPU.ThreadsPerCore = 1
	if first := set.List(); len(first) > 0 {
		sib, err := readTrim(filepath.Join(cpu, fmt.Sprintf("cpu%d", first[0]), "topology", "thread_siblings_list"))
		if err == nil {
			if s, err := cpuset.Parse(sib); err == nil && s.Size() > 0 {
				f.CPU.ThreadsPerCore = s.Size()
			}
		}
		f.CPU.Governor, _ = readTrim(filepath.Join(cpu, fmt.Sprintf("cpu%d", first[0]), "cpufreq", "scaling_governor"))
	}
	return nil
}

func collectIrqbalance(_ context.Context, o options, f *Facts) error {
	fs, err := procfs.NewFS(o.kernel.Proc())
	if err != nil {
		return fmt.Errorf("open %s: %w", o.kernel.Proc(), err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	for _, p := range procs {
		comm, err := p.Comm()
		if errors.Is(err, os.ErrNotExist) {
			continue // exited while we looked
		}
		if comm == "irqbalance" {
			f.Irqbalance = true
			return nil
		}
	}
	return nil
}
