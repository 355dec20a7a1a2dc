package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// testSchema knows one workload, testweb, with one rule of its own (a
// positive integer load.rate), so that plans are checked against
// workload-specific rules without the real workloads, and refuses an
// isolate spec whose cool threshold is not below its hot one.
type testSchema struct{}

func (testSchema) Workloads() []string { return []string{"testweb"} }
func (testSchema) DecodeKnobs(_ string, c *Configuration) (WorkloadKnobs, error) {
	if r, ok := c.Load["rate"]; ok {
		if f, ok := r.(int); !ok || f <= 0 {
			return WorkloadKnobs{}, &KnobError{Knob: "load.rate", Err: fmt.Errorf("load.rate %v: expected a positive integer", r)}
		}
	}
	return WorkloadKnobs{App: c.App, Load: c.Load}, nil
}
func (testSchema) IsolateKeys() (keys, policies []string) {
	return []string{"policy", "interval", "hot_after", "hot_threshold", "cool_threshold", "demote", "irq"}, []string{"shield", "paper", "strict"}
}
func (testSchema) DecodeIsolate(raw map[string]any) (any, *yaml.Node, error) {
	hot, _ := raw["hot_threshold"].(float64)
	cool, _ := raw["cool_threshold"].(float64)
	if cool != 0 && hot != 0 && cool >= hot {
		return nil, nil, &KnobError{Knob: "isolate.cool_threshold", Err: fmt.Errorf("cool threshold %.2f must be below hot threshold %.2f", cool, hot)}
	}
	var n yaml.Node
	err := n.Encode(raw)
	return raw, &n, err
}

func load(t *testing.T, name string, opt Options) *Plan {
	t.Helper()
	p, err := Load(filepath.Join("testdata", name), opt)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return p
}

func TestParseExplicit(t *testing.T) {
	p := load(t, "explicit.yaml", Options{Schema: testSchema{}})
	if p.Name != "redmine-like" || p.Workload != "testweb" || p.Repetitions != 3 ||
		p.Warmup != 10*time.Second || p.Duration != time.Minute || p.Seed != 42 || p.Baseline != "bare-metal" {
		t.Fatalf("top-level fields: %+v", p)
	}
	if got, want := p.Names(), []string{"bare-metal", "docker-default", "docker-volume", "docker-split-tuned"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	bare, _ := p.Config("bare-metal")
	if bare.Runtime != RuntimeHost || bare.Network != NetworkHost || bare.Data != DataBind || bare.Topology != "combined" {
		t.Errorf("bare-metal defaults: %+v", bare.Knobs)
	}
	def, _ := p.Config("docker-default")
	if def.Network != NetworkPublished || def.Data != DataLayer {
		t.Errorf("docker defaults: network %q data %q, want published layer", def.Network, def.Data)
	}
	vol, _ := p.Config("docker-volume")
	wantRes := Resources{CPUSet: "0-1", CPUShares: 512, CPUs: 1.5, MemoryBytes: 1 << 30}
	if vol.Data != DataVolume || vol.Resources != wantRes {
		t.Errorf("docker-volume: data %q resources %+v, want volume %+v", vol.Data, vol.Resources, wantRes)
	}
	tuned, _ := p.Config("docker-split-tuned")
	if tuned.Topology != "split" || tuned.Engine.StorageDriver != "overlay2" || tuned.Engine.UserlandProxy == nil || *tuned.Engine.UserlandProxy {
		t.Errorf("docker-split-tuned knobs: %+v", tuned.Knobs)
	}
	// Configuration-level maps override the plan's key by key.
	if tuned.App["workers"] != 200 || tuned.Load["rate"] != 40 || tuned.Load["poisson"] != true {
		t.Errorf("tuned app/load = %v %v, want workers 200, rate 40, poisson kept", tuned.App, tuned.Load)
	}
	if def.App["workers"] != 150 || def.Load["rate"] != 33 {
		t.Errorf("default app/load = %v %v, want the plan's", def.App, def.Load)
	}
	if p.Quick == nil || p.Quicked {
		t.Errorf("quick section parsed but must not be applied without --quick: %+v", p.Quick)
	}
}

func TestParseQuickAndOnly(t *testing.T) {
	tests := []struct {
		desc      string
		opt       Options
		names     []string
		reps      int
		duration  time.Duration
		rateOfVol any
	}{
		{"quick applies repetitions, window, load and include", Options{Schema: testSchema{}, Quick: true}, []string{"bare-metal", "docker-volume"}, 1, 5 * time.Second, 5},
		{"only keeps the baseline too", Options{Schema: testSchema{}, Only: []string{"docker-volume"}}, []string{"bare-metal", "docker-volume"}, 3, time.Minute, 33},
		{"quick and only together", Options{Schema: testSchema{}, Quick: true, Only: []string{"bare-metal"}}, []string{"bare-metal"}, 1, 5 * time.Second, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := load(t, "explicit.yaml", tt.opt)
			if !reflect.DeepEqual(p.Names(), tt.names) || p.Repetitions != tt.reps || p.Duration != tt.duration {
				t.Fatalf("got names %v reps %d duration %s; want %v %d %s", p.Names(), p.Repetitions, p.Duration, tt.names, tt.reps, tt.duration)
			}
			if vol, ok := p.Config("docker-volume"); ok && vol.Load["rate"] != tt.rateOfVol {
				t.Errorf("docker-volume rate = %v, want %v", vol.Load["rate"], tt.rateOfVol)
			}
		})
	}
}

func TestQuickOverridesConfigLoad(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "explicit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Without include, the tuned configuration's own rate 40 must still
	// shrink to the quick rate: a quick run is a smoke test, not a benchmark.
	src = []byte(strings.Replace(string(src), "  include: [bare-metal, docker-volume]\n", "", 1))
	p, err := Parse("explicit.yaml", src, Options{Schema: testSchema{}, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	tuned, _ := p.Config("docker-split-tuned")
	if tuned.Load["rate"] != 5 || tuned.Load["poisson"] != true {
		t.Errorf("tuned load under --quick = %v, want rate 5 and poisson kept", tuned.Load)
	}
}

func TestMatrixExpansion(t *testing.T) {
	tests := []struct {
		desc  string
		file  string
		names []string
	}{
		{"explicit baseline then the product minus excludes, first axis slowest", "matrix.yaml",
			[]string{"bare", "docker-published-layer", "docker-published-volume", "docker-container-ip-volume", "docker-host-layer"}},
		{"template names with dotted axes and an exclude", "matrix-template.yaml",
			[]string{"docker-proxy=true-w150", "docker-proxy=true-w200", "docker-proxy=false-w200"}},
		{"default names of non-string values carry the knob name", "matrix-default-names.yaml",
			[]string{"docker-userland_proxy=true", "docker-userland_proxy=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := load(t, tt.file, Options{Schema: testSchema{}})
			if got := p.Names(); !reflect.DeepEqual(got, tt.names) {
				t.Fatalf("names = %v, want %v", got, tt.names)
			}
		})
	}

	p := load(t, "matrix.yaml", Options{Schema: testSchema{}})
	c, _ := p.Config("docker-container-ip-volume")
	if c.Runtime != RuntimeDocker || c.Network != NetworkContainerIP || c.Data != DataVolume || c.Load["rate"] != 7 {
		t.Errorf("expanded knobs: %+v", c.Knobs)
	}
	p = load(t, "matrix-template.yaml", Options{Schema: testSchema{}})
	c, _ = p.Config("docker-proxy=false-w200")
	if c.Engine.UserlandProxy == nil || *c.Engine.UserlandProxy || c.App["workers"] != 200 || c.Network != NetworkPublished {
		t.Errorf("dotted axes not applied: %+v", c.Knobs)
	}
	// Entries must not share the engine knob through a pointer.
	c2, _ := p.Config("docker-proxy=true-w200")
	if c2.Engine.UserlandProxy == nil || !*c2.Engine.UserlandProxy {
		t.Errorf("docker-proxy=true-w200 userland_proxy = %v, want true", c2.Engine.UserlandProxy)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		desc string
		file string
		want []string // substrings of the error: file:line: field and what is expected
	}{
		{"malformed YAML names the line", "malformed.yaml", []string{"malformed.yaml:3: malformed YAML"}},
		{"unknown top-level key suggests the closest", "unknown-top.yaml", []string{"unknown-top.yaml:4: repetitons: unknown key; did you mean \"repetitions\"?"}},
		{"unknown configuration knob", "unknown-knob.yaml", []string{"unknown-knob.yaml:9: configurations[1].netwrk: unknown key; did you mean \"network\"?"}},
		{"unknown engine knob", "unknown-engine-key.yaml", []string{"unknown-engine-key.yaml:10: configurations[1].engine.storage-driver: unknown key; did you mean \"storage_driver\"?"}},
		{"container-ip on the host runtime", "host-container-ip.yaml", []string{"host-container-ip.yaml:7: configurations[0] (a).network: \"container-ip\" needs runtime docker"}},
		{"engine knobs on the host runtime", "host-engine.yaml", []string{"host-engine.yaml:8: configurations[0] (a).engine.userland_proxy: engine knobs select a Docker engine"}},
		{"volume on the host runtime", "host-volume.yaml", []string{"host-volume.yaml:7: configurations[0] (a).data: \"volume\" needs runtime docker; the host runtime writes to a directory of the host"}},
		{"zero duration", "zero-duration.yaml", []string{"zero-duration.yaml:4: duration: 0s: expected a positive measured window"}},
		{"bare number as duration", "bare-number-duration.yaml", []string{"bare-number-duration.yaml:4: warmup: expected a duration with a unit like 30s"}},
		{"baseline naming no configuration", "baseline-missing.yaml", []string{"baseline-missing.yaml:3: baseline: \"bare-metl\" names no configuration; expected one of \"bare-metal\""}},
		{"duplicate configuration names", "duplicate-name.yaml", []string{"duplicate-name.yaml:7: configurations[1] (a).name: duplicate configuration name \"a\" (first defined by configurations[0] (a) on line 5)"}},
		{"unknown workload", "unknown-workload.yaml", []string{"unknown-workload.yaml:2: workload: unknown workload \"testwbe\"; did you mean \"testweb\"?"}},
		{"the workload's own validation", "workload-validate.yaml", []string{"workload-validate.yaml:9: configurations[1] (b): configuration \"b\": workload testweb: load.rate -1"}},
		{"network typo", "bad-network.yaml", []string{"bad-network.yaml:9: configurations[1].network: \"publish\" is not valid; did you mean \"published\"?"}},
		{"missing runtime", "missing-runtime.yaml", []string{"missing-runtime.yaml:5: configurations[0] (a).runtime: missing; expected one of \"host\", \"docker\""}},
		{"memory that is not a size", "bad-memory.yaml", []string{"bad-memory.yaml:8: configurations[0].resources.memory: \"lots\": expected a positive size like 512m"}},
		{"cpuset that is not a CPU list", "bad-cpuset.yaml", []string{"bad-cpuset.yaml:8: configurations[0].resources.cpuset: \"1-0x\" is not a CPU list"}},
		{"matrix axis written without its section", "matrix-unknown-axis.yaml", []string{"matrix-unknown-axis.yaml:9: matrix.storage_driver: unknown matrix key; did you mean \"engine.storage_driver\"?"}},
		{"matrix value that is not valid, on its own line", "matrix-bad-value.yaml", []string{"matrix-bad-value.yaml:10: matrix.network[1]: \"container_ip\" is not valid; did you mean \"container-ip\"?"}},
		{"exclude naming no value of the axis", "matrix-exclude-typo.yaml", []string{"matrix-exclude-typo.yaml:12: matrix.exclude[0].data: the string \"volum\" is not a value of the axis"}},
		{"matrix producing a host entry with a published port", "matrix-host-runtime.yaml", []string{"matrix-host-runtime.yaml:9: matrix (runtime=host, network=published).network: \"published\" needs runtime docker"}},
		{"template placeholder that is no axis", "matrix-template-unknown.yaml", []string{"matrix-template-unknown.yaml:7: matrix.name: placeholder {netwrk} is not an axis"}},
		{"quick include naming no configuration", "quick-include.yaml", []string{"quick-include.yaml:11: quick.include[1]: \"c\" names no configuration"}},
		{"quick include without the baseline", "quick-no-baseline.yaml", []string{"quick-no-baseline.yaml:11: quick.include: does not include the baseline \"a\""}},
		{"zero repetitions", "repetitions-zero.yaml", []string{"repetitions-zero.yaml:4: repetitions: 0: expected at least 1"}},
		{"no configurations at all", "no-configurations.yaml", []string{"no-configurations.yaml:1: configurations: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "bad", tt.file), Options{Schema: testSchema{}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestParseCollectsAllErrors(t *testing.T) {
	src := "name: x\nworkload: testweb\nbaseline: a\nduration: -1s\nfoo: 1\nconfigurations:\n  - name: a\n    runtime: host\n    network: published\n"
	_, err := Parse("p.yaml", []byte(src), Options{Schema: testSchema{}})
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %T %v, want Errors", err, err)
	}
	var lines []int
	for _, e := range es {
		lines = append(lines, e.Line)
	}
	if want := []int{4, 5, 9}; !reflect.DeepEqual(lines, want) {
		t.Errorf("error lines = %v, want %v (sorted, all of them):\n%v", lines, want, err)
	}
}

func TestQuickWithoutSection(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "matrix.yaml"), Options{Schema: testSchema{}, Quick: true})
	if err == nil || !strings.Contains(err.Error(), "--quick given but the plan has no quick: section") {
		t.Fatalf("err = %v", err)
	}
}

func TestOnlyUnknown(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "matrix.yaml"), Options{Schema: testSchema{}, Only: []string{"docker-publishd-layer"}})
	if err == nil || !strings.Contains(err.Error(), `--only: "docker-publishd-layer" names no configuration of the plan; did you mean "docker-published-layer"?`) {
		t.Fatalf("err = %v", err)
	}
}

// The canonical form (OUT/plan.yaml) must parse back to the same plan, so
// that --resume can compare hashes and a plan.yaml can be re-run as is.
func TestCanonicalRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		desc string
		file string
		opt  Options
	}{
		{"explicit plan", "explicit.yaml", Options{Schema: testSchema{}}},
		{"quick variant", "explicit.yaml", Options{Schema: testSchema{}, Quick: true}},
		{"matrix plan", "matrix.yaml", Options{Schema: testSchema{}}},
		{"dotted matrix axes", "matrix-template.yaml", Options{Schema: testSchema{}}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			p := load(t, tt.file, tt.opt)
			b1, err := p.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			q, err := Parse("plan.yaml", b1, Options{Schema: testSchema{}})
			if err != nil {
				t.Fatalf("canonical form does not parse: %v\n%s", err, b1)
			}
			b2, err := q.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if string(b1) != string(b2) {
				t.Fatalf("canonical form is not a fixed point:\n%s\n---\n%s", b1, b2)
			}
			h1, _ := p.Hash()
			h2, _ := q.Hash()
			if h1 != h2 {
				t.Errorf("hash changed across round trip")
			}
			for i := range p.Configurations {
				a, b := p.Configurations[i], q.Configurations[i]
				if !reflect.DeepEqual(a.KnobMap(), b.KnobMap()) {
					t.Errorf("%s: knobs %v != %v", a.Name, a.KnobMap(), b.KnobMap())
				}
			}
		})
	}
	a := load(t, "explicit.yaml", Options{Schema: testSchema{}})
	b := load(t, "explicit.yaml", Options{Schema: testSchema{}, Quick: true})
	ha, _ := a.Hash()
	hb, _ := b.Hash()
	if ha == hb {
		t.Error("quick and full variants hash the same; --resume could mix them")
	}
}

// TestRuntimeVM: a vm configuration takes the vm block and no placement,
// engine or container knob, each refused at its line; the vm block on
// another runtime is refused too.
func TestRuntimeVM(t *testing.T) {
	ok := "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: g\n    runtime: vm\n"
	p, err := Parse("p.yaml", []byte(ok), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := p.Config("g")
	if g.Runtime != RuntimeVM || g.Network != NetworkHost || g.Data != DataBind || g.Instances != 1 {
		t.Errorf("vm configuration: %+v", g.Knobs)
	}
	if g.VM.IsZero() || g.Engine.VM != g.VM {
		// The zero block is the default guest; Defaulted fills it.
		if d := g.VM.Defaulted(); d != DefaultVM || g.Engine.Key() != "default" {
			t.Errorf("default guest %+v, engine key %q", d, g.Engine.Key())
		}
	}
	tcg := ok + "    vm: {accel: tcg, vcpus: 1, memory: 1g}\n"
	p, err = Parse("p.yaml", []byte(tcg), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ = p.Config("g")
	want := VMSpec{VCPUs: 1, Memory: 1 << 30, Accel: "tcg", Network: "tap", Disk: "virtio-blk"}
	if g.VM.Defaulted() != want || !g.VM.Emulated() || g.Engine.VM != g.VM || g.Engine.Key() != want.Key() {
		t.Errorf("vm block: %+v (defaulted %+v), engine %+v", g.VM, g.VM.Defaulted(), g.Engine)
	}
	knobs := ok + "    vm: {accel: tcg, network: user, disk: virtiofs}\n"
	p, err = Parse("p.yaml", []byte(knobs), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ = p.Config("g")
	if d := g.VM.Defaulted(); d.Network != "user" || d.Disk != "virtiofs" || !g.VM.Relayed() || !strings.Contains(g.describeKnobs(), RelayNote) {
		t.Errorf("vm block %+v relayed %v, listed as %q", d, g.VM.Relayed(), g.describeKnobs())
	}
	docker := ok + "    vm: {accel: tcg, docker: true}\n"
	p, err = Parse("p.yaml", []byte(docker), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ = p.Config("g")
	if d := g.VM.Defaulted(); !d.Docker || g.Engine.VM != g.VM || !strings.Contains(g.Engine.Key(), "|docker)") || !strings.Contains(g.describeKnobs(), ContainerInVMNote) {
		t.Errorf("vm block %+v, engine key %q, listed as %q: want Docker in the guest", d, g.Engine.Key(), g.describeKnobs())
	}
	if plain := (VMSpec{Accel: "tcg"}).Key(); strings.Contains(plain, "docker") {
		t.Errorf("a guest without Docker keyed %q", plain)
	}
	bad := ok + "    network: published\n    data: volume\n    privileged: true\n    engine: {storage_driver: vfs}\n    isolate: {policy: shield}\n    vm: {accel: xen, vcpus: 0, memory: 100m, disks: 2, network: slirp, disk: 9p, docker: maybe}\n" +
		"  - name: h\n    runtime: host\n    vm: {accel: tcg}\n"
	_, err = Parse("p.yaml", []byte(bad), Options{Schema: testSchema{}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		"p.yaml:9: configurations[1] (g).network: not a knob of runtime vm",
		"p.yaml:10: configurations[1] (g).data: not a knob of runtime vm",
		"p.yaml:11: configurations[1] (g).privileged: not a knob of runtime vm",
		"p.yaml:12: configurations[1] (g).engine.storage_driver: engine knobs select a Docker engine; runtime vm has none",
		"configurations[1] (g).isolate.policy: \"shield\" needs runtime docker or kubernetes: the isolate controller manages containers or pods, and runtime vm has none",
		"p.yaml:14: configurations[1].vm.accel: \"xen\" is not valid",
		"p.yaml:14: configurations[1].vm.vcpus: 0: expected a number of virtual CPUs between 1 and 64",
		"p.yaml:14: configurations[1].vm.memory: 100MiB: a guest needs at least 512m",
		"p.yaml:14: configurations[1].vm.disks: unknown key; did you mean \"disk\"?",
		"p.yaml:14: configurations[1].vm.network: \"slirp\" is not valid",
		"p.yaml:14: configurations[1].vm.disk: \"9p\" is not valid",
		"p.yaml:14: configurations[1].vm.docker: expected true or false",
		"p.yaml:17: configurations[2] (h).vm.accel: the vm block needs runtime vm",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
		}
	}
}

// TestEngineNested: engine.nested (Docker in Docker) has its own engine
// key and refuses what its inner engine cannot do, each at its line.
func TestEngineNested(t *testing.T) {
	ok := "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: n\n    runtime: docker\n    network: host\n    engine: {nested: true, storage_driver: vfs}\n"
	p, err := Parse("p.yaml", []byte(ok), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := p.Config("n")
	if !n.Engine.Nested || n.Engine.IsDefault() || n.Engine.Key() != "nested-vfs" || (EngineSpec{Nested: true}).Key() != "nested-overlay2" {
		t.Errorf("nested engine: %+v key %q", n.Engine, n.Engine.Key())
	}
	bad := "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: n\n    runtime: docker\n    network: published\n    data: bind\n    engine: {nested: true, userland_proxy: false}\n"
	_, err = Parse("p.yaml", []byte(bad), Options{Schema: testSchema{}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		"p.yaml:9: configurations[1] (n).network: \"published\" with engine.nested: the nested engine has no bridge",
		"p.yaml:10: configurations[1] (n).data: \"bind\" with engine.nested",
		"configurations[1] (n).engine.userland_proxy: with engine.nested: the nested engine publishes no ports",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
		}
	}
	// --privileged inside the nested engine is root on the host (issue 24).
	priv := "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: n\n    runtime: docker\n    network: host\n    privileged: true\n    engine: {nested: true}\n"
	_, err = Parse("p.yaml", []byte(priv), Options{Schema: testSchema{}})
	if w := "p.yaml:10: configurations[1] (n).privileged: true with engine.nested"; err == nil || !strings.Contains(err.Error(), w) {
		t.Errorf("privileged with engine.nested: error %v, want %q", err, w)
	}
}

// TestRuntimePodman: podman takes Docker's networks and data placements,
// defaults to a published port on the writable layer, and refuses engine
// knobs (they start private dockerds), the isolate controller and the
// cluster's vocabulary, each at its line.
func TestRuntimePodman(t *testing.T) {
	head := "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: docker\n"
	p, err := Parse("p.yaml", []byte(head+"  - name: p\n    runtime: podman\n"), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Config("p"); c.Runtime != RuntimePodman || c.Network != NetworkPublished || c.Data != DataLayer {
		t.Errorf("podman defaults: %+v", c.Knobs)
	}
	for _, net := range []NetworkMode{NetworkPublished, NetworkPublishedExternal, NetworkContainerIP, NetworkHost} {
		for _, data := range []DataPlacement{DataLayer, DataVolume, DataBind, DataTmpfs} {
			src := fmt.Sprintf("%s  - {name: p, runtime: podman, network: %s, data: %s}\n", head, net, data)
			if _, err := Parse("p.yaml", []byte(src), Options{Schema: testSchema{}}); err != nil {
				t.Errorf("network %s, data %s: %v", net, data, err)
			}
		}
	}
	bad := head + "  - name: p\n    runtime: podman\n    engine: {userland_proxy: false}\n    isolate: {policy: shield}\n    network: pod-ip\n"
	_, err = Parse("p.yaml", []byte(bad), Options{Schema: testSchema{}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		"p.yaml:9: configurations[1] (p).engine.userland_proxy: engine knobs select a Docker engine; runtime podman runs on a podman service of ctrperf's own",
		"configurations[1] (p).isolate.policy: \"shield\" needs runtime docker or kubernetes",
		"p.yaml:11: configurations[1] (p).network:",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
		}
	}
}
