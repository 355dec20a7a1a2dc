package plan

import (
	"bytes"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// The canonical form is the plan as run: every configuration spelled out
// (matrix expanded, plan-level app and load merged in, defaults filled, the
// quick variant applied) and no matrix or quick section. It is itself a
// valid plan, parsing it gives the same configurations, and its hash
// identifies the runs for --resume.

type canonPlan struct {
	Name           string         `yaml:"name"`
	Description    string         `yaml:"description,omitempty"`
	Workload       string         `yaml:"workload"`
	Repetitions    int            `yaml:"repetitions"`
	Warmup         string         `yaml:"warmup"`
	Duration       string         `yaml:"duration"`
	Seed           int64          `yaml:"seed"`
	Baseline       string         `yaml:"baseline"`
	LoadCPUSet     string         `yaml:"load_cpuset,omitempty"`
	BaseDir        string         `yaml:"base_dir,omitempty"`
	SSHConfig      string         `yaml:"ssh_config,omitempty"`
	Configurations []canonConfig  `yaml:"configurations"`
	Thresholds     map[string]any `yaml:"thresholds,omitempty"`
}

type canonConfig struct {
	Name       string           `yaml:"name"`
	Runtime    string           `yaml:"runtime"`
	Engine     *EngineSpec      `yaml:"engine,omitempty"`
	Network    string           `yaml:"network,omitempty"`
	Data       string           `yaml:"data,omitempty"`
	Filesystem *canonFilesystem `yaml:"filesystem,omitempty"`
	Topology   string           `yaml:"topology,omitempty"`
	Resources  *canonResources  `yaml:"resources,omitempty"`
	Isolate    *yaml.Node       `yaml:"isolate,omitempty"`
	// Privileged and Instances are left out at their defaults (false, 1),
	// so plans that do not use them keep their canonical form and hash.
	Privileged bool           `yaml:"privileged,omitempty"`
	Instances  int            `yaml:"instances,omitempty"`
	Hosts      *canonHosts    `yaml:"hosts,omitempty"` // left out when everything runs here
	Kubernetes *KubeSpec      `yaml:"kubernetes,omitempty"`
	VM         *VMSpec        `yaml:"vm,omitempty"`
	App        map[string]any `yaml:"app,omitempty"`
	Load       map[string]any `yaml:"load,omitempty"`
}

type canonResources struct {
	CPUSet    string  `yaml:"cpuset,omitempty"`
	CPUShares int64   `yaml:"cpu_shares,omitempty"`
	CPUs      float64 `yaml:"cpus,omitempty"`
	Memory    string  `yaml:"memory,omitempty"`
}

// Canonical renders the plan as run, as YAML.
func (p *Plan) Canonical() ([]byte, error) {
	cp := canonPlan{
		Name: p.Name, Description: p.Description, Workload: p.Workload,
		Repetitions: p.Repetitions, Warmup: p.Warmup.String(), Duration: p.Duration.String(),
		Seed: p.Seed, Baseline: p.Baseline, LoadCPUSet: p.LoadCPUSet, SSHConfig: p.SSHConfig,
	}
	if p.UsesDir {
		cp.BaseDir = p.Dir
	}
	for i := range p.Configurations {
		cp.Configurations = append(cp.Configurations, p.Configurations[i].canonical())
	}
	cp.Thresholds = canonicalThresholds(p.Thresholds, p.Configurations)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cp); err != nil {
		return nil, fmt.Errorf("render plan %s: %w", p.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render plan %s: %w", p.Name, err)
	}
	return buf.Bytes(), nil
}

// canonical is the configuration as the canonical plan spells it.
func (c *Configuration) canonical() canonConfig {
	cc := canonConfig{
		Name: c.Name, Runtime: string(c.Runtime), Network: string(c.Network),
		Data: string(c.Data), Topology: c.Topology, App: c.App, Load: c.Load,
	}
	if !c.Engine.IsDefault() {
		e := c.Engine
		cc.Engine = &e
	}
	if c.Resources != (Resources{}) {
		cc.Resources = &canonResources{CPUSet: c.Resources.CPUSet, CPUShares: c.Resources.CPUShares, CPUs: c.Resources.CPUs}
		if c.Resources.MemoryBytes != 0 {
			cc.Resources.Memory = strconv.FormatInt(c.Resources.MemoryBytes, 10)
		}
	}
	cc.Isolate = canonicalIsolate(c.Isolate)
	cc.Privileged = c.Privileged
	if c.Instances > 1 {
		cc.Instances = c.Instances
	}
	cc.Filesystem = canonicalFilesystem(c.Filesystem)
	cc.Hosts = canonicalHosts(c.Hosts)
	if !c.Kube.IsZero() {
		k := c.Kube
		cc.Kubernetes = &k
	}
	if !c.VM.IsZero() {
		v := c.VM
		cc.VM = &v
	}
	return cc
}

// KnobMap is the configuration's knobs as stored in each RunRecord: its
// canonical form (what OUT/plan.yaml holds for it) without the name, so a
// record and the plan it came from spell every knob the same way.
func (c *Configuration) KnobMap() map[string]any {
	cc := c.canonical()
	cc.Name = ""
	b, err := yaml.Marshal(cc)
	var m map[string]any
	if err == nil {
		err = yaml.Unmarshal(b, &m)
	}
	if err != nil {
		// Plain strings, numbers and maps decoded from YAML always render;
		// say so in the record rather than drop the knobs silently.
		return map[string]any{"error": fmt.Sprintf("render knobs of %s: %v", c.Name, err)}
	}
	delete(m, "name")
	return m
}
