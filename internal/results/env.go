package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// EnvFileName is the environment facts file of an output directory
// (written by bench; the report reads what concerns the results' validity).
const EnvFileName = "env.json"

// Concurrency is what OUT/env.json says about other `bench run` sessions
// that ran beside this one: a run started with --allow-concurrent shares
// the machine, and its numbers are disturbed by the other's.
type Concurrency struct {
	AllowConcurrent bool `json:"allow_concurrent"`
	// Beside are the live sessions found when an invocation started
	// (owner descriptions: pid, command, start, output).
	Beside []string `json:"beside,omitempty"`
}

// ReadConcurrency reads the concurrency section of dir/env.json; nil when
// the file or the section is missing.
func ReadConcurrency(dir string) (*Concurrency, error) {
	b, err := os.ReadFile(filepath.Join(dir, EnvFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Concurrency *Concurrency `json:"concurrency"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, EnvFileName), err)
	}
	return doc.Concurrency, nil
}

// Machine is the machine section of OUT/env.json: what a reader of the
// results needs to know about where they were measured.
type Machine struct {
	Time      time.Time `json:"time"`
	Hostname  string    `json:"hostname,omitempty"`
	Kernel    string    `json:"kernel,omitempty"`
	Machine   string    `json:"machine,omitempty"` // architecture, uname -m
	CPUs      int       `json:"cpus"`
	MemTotal  uint64    `json:"mem_total_bytes,omitempty"`
	GoVersion string    `json:"go_version"`
	Ctrperf   string    `json:"ctrperf_version"`
	CPUModel  string    `json:"cpu_model,omitempty"`
	// Cgroups is the cgroup layout: v1, v2 or hybrid.
	Cgroups string `json:"cgroups,omitempty"`
	// BootID is /proc/sys/kernel/random/boot_id, to tell whether a plan's
	// hosts are this machine's kernel (see HostInfo).
	BootID string `json:"boot_id,omitempty"`
}

// Env is OUT/env.json: the machine ctrperf ran on, every engine the runs
// used, the concurrency section, and the plan's hosts when it had some
// (hosts:): each as its agent described it, with its clock offset.
type Env struct {
	Machine     *Machine     `json:"machine,omitempty"`
	Engines     []EngineInfo `json:"engines,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Hosts       []HostInfo   `json:"hosts,omitempty"`
}

// ReadEnv reads dir/env.json; nil when there is none.
func ReadEnv(dir string) (*Env, error) {
	path := filepath.Join(dir, EnvFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var e Env
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &e, nil
}
