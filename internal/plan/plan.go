// Package plan reads benchmark plan files: a workload, its load profile, a
// baseline configuration and the configurations to compare, given one by one
// or as a matrix (cartesian product over knob lists, with excludes).
//
// Parsing walks yaml.v3 nodes so that every problem is reported with the
// file, line and field it comes from and what was expected; unknown keys are
// errors with a suggestion, and impossible combinations (container networking
// on the host runtime, engine knobs without Docker, a baseline that names no
// configuration, ...) are caught before anything runs. The package also
// decides the run order: repetitions interleaved across configurations,
// shuffled per round with the plan's seed.
//
// plan is a leaf of the pipeline (it imports the standard library, YAML and
// cpuset only): it owns the vocabulary of a configuration (runtime,
// network, data, resources, engine and isolate knobs) that the engine
// deploys, and leaves what its schema cannot know to an injected Schema
// (bench.Schema): the workloads decode their own app and load knobs once,
// into typed values, when the plan is read.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults for what a plan may leave out.
const (
	DefaultRepetitions = 3 // as the source documents did
	DefaultWarmup      = 5 * time.Second
	DefaultDuration    = 30 * time.Second
	// DefaultSeed keeps a plan without a seed reproducible: the same file
	// always gives the same run order.
	DefaultSeed = 1
)

// Plan is a validated plan with its configurations expanded (matrix entries
// included) and, when asked for, the quick variant applied.
type Plan struct {
	File        string
	Name        string
	Description string
	Workload    string
	Repetitions int
	Warmup      time.Duration
	Duration    time.Duration
	Seed        int64
	Baseline    string
	// LoadCPUSet pins the load generator (e.g. "1"), empty for no pinning.
	LoadCPUSet string
	// Configurations in file order: explicit ones first, then the matrix's.
	// Their App and Load already include the plan-level maps.
	Configurations []Configuration
	// Quick is the plan's quick variant as written (nil if it has none);
	// Quicked says it was applied.
	Quick   *Quick
	Quicked bool
	// Thresholds are the plan's CI gates, checked by `bench run` at the end
	// and by `report` (exit code 3 when one is broken). They do not change
	// the runs, so they are left out of Hash.
	Thresholds []Threshold
	// Dir is the absolute directory that relative paths in workload knobs
	// (a scenario file, a Dockerfile context) are read from: the plan's
	// base_dir, by default the directory of the plan file. The canonical
	// form records it when a workload used it (UsesDir), so that the plan
	// as run (OUT/plan.yaml) reads the same files on --resume.
	Dir     string
	UsesDir bool
	// Hosts are the plan-level hosts: (each configuration's Hosts has them
	// merged in) and SSHConfig the ssh config file they are read with
	// (ssh -F; empty: ssh's own). See hosts.go.
	Hosts     Hosts
	SSHConfig string
}

// Knobs are what distinguishes one configuration from another.
type Knobs struct {
	Runtime Runtime
	Engine  EngineSpec
	Network NetworkMode
	Data    DataPlacement
	// Filesystem puts the data directory on a loop-mounted filesystem of
	// ctrperf's own (zero: where Data puts it).
	Filesystem FilesystemSpec
	Topology   string
	Resources  Resources
	// Isolate runs the isolate controller during the run (docker only).
	Isolate IsolateSpec
	// Privileged runs every container of the configuration with
	// --privileged (docker only): all capabilities, all devices, no
	// seccomp or AppArmor profile.
	Privileged bool
	// Instances is how many identical deployments of the workload one run
	// deploys and drives together (1, the default, is one); the record
	// holds their aggregate and each instance's figures.
	Instances int
	// Hosts are where the system under test and the load generator run
	// (plan-level and --hosts merged in; zero: this machine).
	Hosts Hosts
	// Kube is the kubernetes: block (runtime kubernetes only).
	Kube KubeSpec
	// VM is the vm: block (runtime vm only).
	VM VMSpec
	// App and Load are the workload's knobs as written (plan-level ones
	// merged in): what run records and the canonical plan keep. Decoded
	// holds them as the workload's typed values.
	App     map[string]any
	Load    map[string]any
	Decoded WorkloadKnobs

	// nodes remembers where each knob was set so that checks made after
	// expansion can still point at a line.
	nodes map[string]*yaml.Node
}

// Configuration is one named set of knobs.
type Configuration struct {
	Name string
	Knobs
	// Origin says where it came from, for messages: "configurations[2]" or
	// "matrix (network=published, data=volume)".
	Origin string
	Line   int
	// Dir is the plan's Dir, for the workload's Decode.
	Dir string
}

// Quick is the plan's `quick:` section, applied by --quick: fewer, shorter
// runs of a subset of configurations, for a smoke test of the plan itself.
type Quick struct {
	Repetitions int
	Warmup      *time.Duration
	Duration    *time.Duration
	Load        map[string]any
	Include     []string

	repetitionsNode *yaml.Node // where Repetitions was set, for errors
}

// Options select a variant of the plan.
type Options struct {
	Quick bool     // apply the quick: section
	Only  []string // keep only these configurations (and the baseline)
	// Schema decodes the workload's knobs and checks isolate parameters;
	// nil checks the plan's own schema only (see Schema).
	Schema Schema
	// Hosts and SSHConfig override the plan's (--hosts, --ssh-config):
	// each role they set, in every configuration.
	Hosts     Hosts
	SSHConfig string
}

// Load reads and validates a plan file.
func Load(path string, opt Options) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return Parse(path, b, opt)
}

// Parse validates a plan. file names it in errors. The error, if any, is an
// Errors listing every problem found.
func Parse(file string, data []byte, opt Options) (*Plan, error) {
	d := &decoder{file: file}
	p := d.parse(data, opt)
	if len(d.errs) > 0 {
		return nil, d.errs.sorted()
	}
	return p, nil
}

var topKeys = []string{"name", "description", "workload", "load", "app", "repetitions",
	"warmup", "duration", "seed", "baseline", "load_cpuset", "configurations", "matrix", "quick", "thresholds", "base_dir", "hosts", "ssh_config"}

var configKeys = []string{"name", "runtime", "engine", "network", "data", "filesystem", "topology", "resources", "isolate", "privileged", "instances", "hosts", KeyKubernetes, "vm", "app", "load"}

// KeyKubernetes is the key of a configuration's kubernetes: block, in the
// plan and in a record's knobs.
const KeyKubernetes = "kubernetes"

// Bounds on a plan's size, checked before the matrix is multiplied out and
// before the run order is built: a few lines of YAML must not make
// `bench validate` exhaust memory.
const (
	// MaxRuns bounds configurations × repetitions.
	MaxRuns = 100000
	// MaxMatrixEntries bounds the combinations of a matrix's axes, counted
	// before excludes (the walk over them is the cost).
	MaxMatrixEntries = 10000
)

// MaxInstances bounds the instances knob: each instance is a whole
// deployment, driven by a generator of its own.
const MaxInstances = 64

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+=-]*$`)

func (d *decoder) parse(data []byte, opt Options) *Plan {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.errs = append(d.errs, &FieldError{File: d.file, Line: yamlLine(err), Msg: "malformed YAML: " + err.Error()})
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.errorf(nil, "", "the plan is empty; expected at least name, workload and configurations")
		return nil
	}
	root := doc.Content[0]
	pairs, ok := d.mapping(root, "", topKeys)
	if !ok {
		return nil
	}
	top := map[string]pair{}
	for _, pr := range pairs {
		top[pr.key] = pr
	}
	p := &Plan{File: d.file, Repetitions: DefaultRepetitions, Warmup: DefaultWarmup, Duration: DefaultDuration, Seed: DefaultSeed}

	required := func(key, what string) (pair, bool) {
		pr, ok := top[key]
		if !ok {
			d.errorf(root, key, "missing; expected %s", what)
		}
		return pr, ok
	}
	if pr, ok := required("name", "a short plan name like smoke"); ok {
		if s, ok := d.str(pr.value, "name"); ok {
			if !nameRE.MatchString(s) {
				d.errorf(pr.value, "name", "%q: expected letters, digits, '.', '_', '-' (it names output directories)", s)
			}
			p.Name = s
		}
	}
	if pr, ok := top["description"]; ok {
		p.Description, _ = d.str(pr.value, "description")
	}
	d.schema = opt.Schema
	knownWorkload := false
	if pr, ok := required("workload", "a registered workload name"); ok {
		if s, ok := d.str(pr.value, "workload"); ok {
			p.Workload = s
			if known := d.workloads(); !contains(known, s) && d.schema != nil {
				msg := fmt.Sprintf("unknown workload %q; expected %s", s, oneOf(known))
				if len(known) == 0 {
					msg = fmt.Sprintf("unknown workload %q; no workloads are registered in this build", s)
				}
				if c := closest(s, known); c != "" {
					msg = fmt.Sprintf("unknown workload %q; did you mean %q?", s, c)
				}
				d.errorf(pr.value, "workload", "%s", msg)
			} else {
				knownWorkload = d.schema != nil
			}
		}
	}
	repsNode := root
	if pr, ok := top["repetitions"]; ok {
		repsNode = pr.value
		if v, ok := d.integer(pr.value, "repetitions"); ok {
			switch {
			case v < 1:
				d.errorf(pr.value, "repetitions", "%d: expected at least 1 (3 or more for a confidence interval)", v)
			case v > MaxRuns:
				d.errorf(pr.value, "repetitions", "%d: expected at most %d (a plan has at most %d runs, configurations × repetitions)", v, MaxRuns, MaxRuns)
			default:
				p.Repetitions = int(v)
			}
		}
	}
	if pr, ok := top["warmup"]; ok {
		if v, ok := d.duration(pr.value, "warmup"); ok {
			if v < 0 {
				d.errorf(pr.value, "warmup", "%s: expected zero or a positive duration", v)
			}
			p.Warmup = v
		}
	}
	if pr, ok := top["duration"]; ok {
		if v, ok := d.duration(pr.value, "duration"); ok {
			if v <= 0 {
				d.errorf(pr.value, "duration", "%s: expected a positive measured window like 30s", v)
			}
			p.Duration = v
		}
	}
	if pr, ok := top["seed"]; ok {
		if v, ok := d.integer(pr.value, "seed"); ok {
			p.Seed = v
		}
	}
	if pr, ok := top["load_cpuset"]; ok {
		if s, ok := d.str(pr.value, "load_cpuset"); ok {
			d.checkCPUSet(pr.value, "load_cpuset", s)
			p.LoadCPUSet = s
		}
	}
	p.Dir = d.baseDir(top)
	d.planHosts(p, top, opt)
	var planApp, planLoad map[string]any
	planNodes := map[string]*yaml.Node{}
	if pr, ok := top["app"]; ok {
		planApp, _ = d.anyMap(pr.value, "app", "app", planNodes)
		planNodes["app"] = pr.value
	}
	if pr, ok := top["load"]; ok {
		planLoad, _ = d.anyMap(pr.value, "load", "load", planNodes)
		planNodes["load"] = pr.value
	}

	// Configurations, explicit then matrix.
	var configs []Configuration
	if pr, ok := top["configurations"]; ok {
		if items, ok := d.sequence(pr.value, "configurations"); ok {
			for i, it := range items {
				if c, ok := d.configuration(it, index("configurations", i)); ok {
					configs = append(configs, c)
				}
			}
		}
	}
	if pr, ok := top["matrix"]; ok {
		configs = append(configs, d.matrix(pr.value, "matrix")...)
	}
	if _, hasC := top["configurations"]; !hasC {
		if _, hasM := top["matrix"]; !hasM {
			d.errorf(root, "configurations", "missing; expected a list of configurations and/or a matrix")
		}
	}
	byName := map[string]*Configuration{}
	for i := range configs {
		c := &configs[i]
		if prev, dup := byName[c.Name]; dup {
			d.errorf(c.nodes["name"], c.Origin+".name", "duplicate configuration name %q (first defined by %s on line %d); names must be unique", c.Name, prev.Origin, prev.Line)
			continue
		}
		byName[c.Name] = c
	}

	if pr, ok := required("baseline", "the name of the configuration others are compared with"); ok {
		if s, ok := d.str(pr.value, "baseline"); ok {
			p.Baseline = s
			if _, found := byName[s]; !found && len(configs) > 0 {
				d.errorf(pr.value, "baseline", "%q names no configuration; expected %s", s, oneOf(names(configs)))
			}
		}
	}

	if pr, ok := top["thresholds"]; ok {
		p.Thresholds = d.thresholds(pr.value, "thresholds")
		d.checkThresholds(p.Thresholds, configs, p.Baseline)
	}

	if pr, ok := top["quick"]; ok {
		quickNodes := map[string]*yaml.Node{}
		p.Quick = d.quick(pr.value, "quick", byName, p.Baseline, quickNodes)
		if opt.Quick {
			maps.Copy(planNodes, quickNodes)
		}
	}
	if opt.Quick {
		if p.Quick == nil {
			d.errorf(root, "quick", "--quick given but the plan has no quick: section; add one (repetitions, duration, warmup, load, include)")
		} else {
			configs = p.applyQuick(configs, p.Quick)
			planLoad = mergeMaps(planLoad, p.Quick.Load)
			p.Quicked = true
		}
	}
	if len(opt.Only) > 0 {
		configs = d.only(configs, opt.Only, p.Baseline)
	}
	if p.Quicked && p.Quick.repetitionsNode != nil {
		repsNode = p.Quick.repetitionsNode
	}
	if n := len(configs); n > 0 && n*p.Repetitions > MaxRuns {
		d.errorf(repsNode, "repetitions", "%d configurations × %d repetitions = %d runs; expected at most %d (fewer repetitions, or fewer configurations: a smaller matrix, --only)",
			n, p.Repetitions, n*p.Repetitions, MaxRuns)
	}

	for i := range configs {
		c := &configs[i]
		c.App = mergeMaps(planApp, c.App)
		c.Load = mergeMaps(planLoad, c.Load)
		if p.Quicked {
			// The quick variant shrinks the load of every configuration,
			// including those that set their own.
			c.Load = mergeMaps(c.Load, p.Quick.Load)
		}
		p.applyHosts(c, opt)
		c.applyDefaults()
		d.checkKnobs(c)
		d.checkKubeClient(p.Workload, c)
		c.Dir = p.Dir
		if knownWorkload {
			d.decodeKnobs(p.Workload, c, planNodes)
			p.UsesDir = p.UsesDir || c.Decoded.UsesDir
			d.checkKubeClientLoad(p.Workload, c)
		}
	}
	d.checkFilesystemBaseline(configs, p.Baseline)
	p.Configurations = configs
	return p
}

// baseDir is the absolute directory relative paths of workload knobs are
// read from: base_dir (relative to the plan file's directory) or the plan
// file's directory.
func (d *decoder) baseDir(top map[string]pair) string {
	dir := filepath.Dir(d.file)
	if pr, ok := top["base_dir"]; ok {
		if s, ok := d.str(pr.value, "base_dir"); ok {
			if s == "" {
				d.errorf(pr.value, "base_dir", "empty; expected a directory (relative to the plan file's)")
			} else if filepath.IsAbs(s) {
				dir = s
			} else {
				dir = filepath.Join(dir, s)
			}
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Clean(dir)
}

// configuration decodes one explicit configuration.
func (d *decoder) configuration(n *yaml.Node, field string) (Configuration, bool) {
	c := Configuration{Origin: field, Line: deref(n).Line}
	c.nodes = map[string]*yaml.Node{}
	pairs, ok := d.mapping(n, field, configKeys)
	if !ok {
		return c, false
	}
	hasName := false
	for _, pr := range pairs {
		if pr.key == "name" {
			hasName = true
			if s, ok := d.str(pr.value, join(field, "name")); ok {
				if !nameRE.MatchString(s) {
					d.errorf(pr.value, join(field, "name"), "%q: expected letters, digits, '.', '_', '+', '=', '-' (it names runs and containers)", s)
				}
				c.Name = s
				c.nodes["name"] = pr.value
				c.Origin = fmt.Sprintf("%s (%s)", field, s)
			}
			continue
		}
		d.setKnob(&c.Knobs, pr.key, pr.value, join(field, pr.key))
	}
	if !hasName {
		d.errorf(n, join(field, "name"), "missing; every configuration needs a unique name")
		return c, false
	}
	return c, true
}

var (
	runtimes   = runtimeNames()
	networks   = append([]string{string(NetworkHost), string(NetworkPublished), string(NetworkPublishedExternal), string(NetworkContainerIP)}, kubeNetworks...)
	placements = append([]string{string(DataLayer), string(DataVolume), string(DataBind), string(DataTmpfs)}, kubePlacements[1:]...)
	topologies = []string{"combined", "split"}
	// Storage drivers dockerd knows; whether one works here is the engine's
	// finding at run time (a not_run record), not a validation error.
	storageDrivers = []string{"overlay2", "overlay", "btrfs", "vfs", "zfs", "fuse-overlayfs", "devicemapper", "aufs"}
	dataRoots      = []string{"native", "loop-ext4", "loop-xfs", "loop-btrfs"}
	engineKeys     = []string{"storage_driver", "data_root", "userland_proxy", "nested"}
	resourceKeys   = []string{"cpuset", "cpu_shares", "cpus", "memory"}
)

// knobBlock is a knob made of sub-knobs: set decodes one of them (a
// block's key in a configuration, or a matrix axis "engine.nested");
// keys are its sub-knobs' names, for a whole mapping.
type knobBlock struct {
	keys func(d *decoder) []string
	set  func(d *decoder, k *Knobs, key string, n *yaml.Node, field string)
}

// knobBlocks are the blocks, each listed once. hosts is one too, but its
// whole mapping is decoded by setHosts (roles, then destinations).
var knobBlocks map[string]knobBlock

func init() {
	fixed := func(keys []string) func(*decoder) []string { return func(*decoder) []string { return keys } }
	knobBlocks = map[string]knobBlock{
		"engine":      {fixed(engineKeys), (*decoder).setEngine},
		"resources":   {fixed(resourceKeys), (*decoder).setResource},
		"filesystem":  {fixed(filesystemKeys), (*decoder).setFilesystem},
		KeyKubernetes: {fixed(kubeKeys), (*decoder).setKube},
		"vm":          {fixed(vmKeys), (*decoder).setVM},
		"isolate":     {func(d *decoder) []string { keys, _ := d.isolateKeys(); return keys }, (*decoder).setIsolate},
		"hosts":       {nil, (*decoder).setHost},
	}
}

// setKnob sets the knob at path ("network", "engine.storage_driver",
// "app.max_clients", or a whole "engine"/"resources"/"app"/"load" mapping)
// from a node. Explicit configurations and matrix axes both come through
// here, so they accept exactly the same values.
func (d *decoder) setKnob(k *Knobs, path string, n *yaml.Node, field string) {
	if k.nodes == nil {
		k.nodes = map[string]*yaml.Node{}
	}
	head, rest, nested := cut(path)
	switch {
	case nested && (head == "app" || head == "load"):
		var v any
		if err := n.Decode(&v); err != nil {
			d.errorf(n, field, "cannot decode: %v", err)
			return
		}
		m := &k.App
		if head == "load" {
			m = &k.Load
		}
		if *m == nil {
			*m = map[string]any{}
		}
		(*m)[rest] = v
		recordNodes(k.nodes, path, n)
		return
	case nested && knobBlocks[head].set != nil:
		knobBlocks[head].set(d, k, rest, n, field)
		return
	case nested:
		d.errorf(n, field, "%q has no sub-knobs", head)
		return
	}
	k.nodes[path] = n
	if b := knobBlocks[path]; b.keys != nil {
		if pairs, ok := d.mapping(n, field, b.keys(d)); ok {
			for _, pr := range pairs {
				b.set(d, k, pr.key, pr.value, join(field, pr.key))
			}
		}
		return
	}
	switch path {
	case "runtime":
		if s, ok := d.enum(n, field, runtimes); ok {
			k.Runtime = Runtime(s)
		}
	case "network":
		if s, ok := d.enum(n, field, networks); ok {
			k.Network = NetworkMode(s)
		}
	case "data":
		if s, ok := d.enum(n, field, placements); ok {
			k.Data = DataPlacement(s)
		}
	case "topology":
		if s, ok := d.enum(n, field, topologies); ok {
			k.Topology = s
		}
	case "privileged":
		if b, ok := d.boolean(n, field); ok {
			k.Privileged = b
		}
	case "instances":
		if v, ok := d.integer(n, field); ok {
			if v < 1 || v > MaxInstances {
				d.errorf(n, field, "%d: expected a number of identical deployments between 1 and %d", v, MaxInstances)
				v = 1
			}
			k.Instances = int(v)
		}
	case "hosts":
		d.setHosts(k, n, field)
	case "app", "load":
		if m, ok := d.anyMap(n, field, path, k.nodes); ok {
			if path == "app" {
				k.App = mergeMaps(k.App, m)
			} else {
				k.Load = mergeMaps(k.Load, m)
			}
		}
	default:
		d.errorf(n, field, "unknown knob")
	}
}

func (d *decoder) setEngine(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["engine."+key] = n
	switch key {
	case "storage_driver":
		if s, ok := d.enum(n, field, storageDrivers); ok {
			k.Engine.StorageDriver = s
		}
	case "data_root":
		if s, ok := d.enum(n, field, dataRoots); ok {
			k.Engine.DataRoot = s
		}
	case "userland_proxy":
		if b, ok := d.boolean(n, field); ok {
			k.Engine.UserlandProxy = &b
		}
	case "nested":
		if b, ok := d.boolean(n, field); ok {
			k.Engine.Nested = b
		}
	default:
		d.unknownSub(n, field, key, engineKeys)
	}
}

func (d *decoder) setResource(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["resources."+key] = n
	switch key {
	case "cpuset":
		if s, ok := d.str(n, field); ok {
			d.checkCPUSet(n, field, s)
			k.Resources.CPUSet = s
		}
	case "cpu_shares":
		if v, ok := d.integer(n, field); ok {
			if v < 2 || v > 262144 {
				d.errorf(n, field, "%d: expected a weight between 2 and 262144 (1024 is the default share)", v)
			}
			k.Resources.CPUShares = v
		}
	case "cpus":
		if v, ok := d.float(n, field); ok {
			if v <= 0 {
				d.errorf(n, field, "%g: expected a positive number of CPUs like 1.5", v)
			}
			k.Resources.CPUs = v
		}
	case "memory":
		if v, ok := d.memory(n, field); ok {
			k.Resources.MemoryBytes = v
		}
	default:
		d.unknownSub(n, field, key, resourceKeys)
	}
}

func (d *decoder) unknownSub(n *yaml.Node, field, key string, known []string) {
	msg := "unknown key"
	if s := closest(key, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else {
		msg += "; expected " + oneOf(known)
	}
	d.errorf(n, field, "%s", msg)
}

func (c *Configuration) node(path string) *yaml.Node {
	if n := c.nodes[path]; n != nil {
		return n
	}
	return &yaml.Node{Line: c.Line}
}

// applyDefaults fills what a configuration left out, from its runtime's
// traits: the host runtime only has host networking and writes to a
// directory of the host; Docker's default is a published port on the
// writable layer, which is what `docker run -p` gives.
func (c *Configuration) applyDefaults() {
	t := c.Runtime.Traits()
	if c.Network == "" {
		c.Network = t.Network
	}
	if c.Data == "" {
		c.Data = t.Data
	}
	if c.Topology == "" {
		c.Topology = "combined"
	}
	if c.Instances == 0 {
		c.Instances = 1
	}
	if c.Runtime.Traits().Cluster {
		c.Engine.Kube = c.Kube // the engine is the cluster, as the block asks
	}
	if c.Runtime.Traits().Guest {
		c.Engine.VM = c.VM // the engine is the guest, as the block asks
	}
}

// Config returns the configuration with that name.
func (p *Plan) Config(name string) (*Configuration, bool) {
	for i := range p.Configurations {
		if p.Configurations[i].Name == name {
			return &p.Configurations[i], true
		}
	}
	return nil, false
}

// Names lists the configuration names in plan order.
func (p *Plan) Names() []string { return names(p.Configurations) }

func names(cs []Configuration) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// Hash identifies the plan as run (after --quick and --only): two plans
// with the same hash produce the same runs in the same order, which is what
// --resume needs to know.
func (p *Plan) Hash() (string, error) {
	cp := *p
	cp.Thresholds = nil // a changed gate is still the same runs
	b, err := cp.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// decodeKnobs has the workload decode a complete configuration's knobs, once,
// and turns each problem into an error at the line that set its knob (the
// configuration's name when no line is known).
func (d *decoder) decodeKnobs(workload string, c *Configuration, planNodes map[string]*yaml.Node) {
	k, err := d.schema.DecodeKnobs(workload, c)
	c.Decoded = k
	for _, e := range leafErrors(err) {
		n, ok := knobNode(e, c, planNodes)
		if !ok {
			n = c.node("name")
		}
		d.errorf(n, c.Origin, "configuration %q: workload %s: %v", c.Name, workload, e)
	}
}

// mergeMaps returns base with over's keys on top, without touching either.
func mergeMaps(base, over map[string]any) map[string]any {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]any, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

func cut(path string) (head, rest string, nested bool) {
	i := bytes.IndexByte([]byte(path), '.')
	if i < 0 {
		return path, "", false
	}
	return path[:i], path[i+1:], true
}
