package engine

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"

	"ctrperf/internal/kernel"
)

func TestExpandTemplates(t *testing.T) {
	bridge := Bindings{
		"app": {Host: "ctrperf-r1-app", PortsIdentity: true, DataDir: "/data"},
		"db":  {Host: "ctrperf-r1-db", PortsIdentity: true, DataDir: "/var/lib/mysql"},
	}
	shared := Bindings{
		"app": {Host: "127.0.0.1", Ports: map[int]int{8080: 40001}, DataDir: "/var/lib/ctrperf/host/r1/app"},
		"db":  {Host: "127.0.0.1", Ports: map[int]int{3306: 40002}},
	}
	tests := []struct {
		desc    string
		b       Bindings
		in      string
		want    string
		wantErr string
	}{
		{"no template passes through", bridge, "--listen=:80", "--listen=:80", ""},
		{"bridge port unchanged", bridge, "-p {{port:app:8080}}", "-p 8080", ""},
		{"bridge port not declared still its own", bridge, "{{port:db:3306}}", "3306", ""},
		{"bridge addr is the container name", bridge, "mysql://{{addr:db:3306}}/x", "mysql://ctrperf-r1-db:3306/x", ""},
		{"data dir as the process sees it", bridge, "--datadir={{data:db}}", "--datadir=/var/lib/mysql", ""},
		{"shared port relocated", shared, ":{{port:app:8080}}", ":40001", ""},
		{"shared addr on loopback", shared, "{{addr:db:3306}}", "127.0.0.1:40002", ""},
		{"spaces inside braces", shared, "{{ port : app : 8080 }}", "40001", ""},
		{"two templates in one string", shared, "{{addr:db:3306}},{{port:app:8080}}", "127.0.0.1:40002,40001", ""},
		{"unknown service", bridge, "{{addr:cache:11211}}", "", `unknown service "cache"`},
		{"undeclared port on a shared namespace", shared, "{{port:db:3307}}", "", "does not declare port 3307"},
		{"port template without port", bridge, "{{port:app}}", "", "needs a port"},
		{"data without DataDir", shared, "{{data:db}}", "", "has no DataDir"},
		{"data with a port", bridge, "{{data:db:1}}", "", "data takes no port"},
		{"misspelt kind is caught", bridge, "{{port:app:http}}", "", "malformed template"},
		{"unrelated braces pass", bridge, "{{.Name}}", "{{.Name}}", ""},
		{"listen in an own namespace", bridge, "{{listen:app}}:{{port:app:8080}}", "0.0.0.0:8080", ""},
		{"listen on the host's namespace", shared, "{{listen:app}}:{{port:app:8080}}", "127.0.0.1:40001", ""},
		{"listen takes no port", shared, "{{listen:app:80}}", "", "listen takes no port"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.b.Expand(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Expand(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Expand(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRelocatedPorts(t *testing.T) {
	tests := []struct {
		desc string
		svc  Service
		argv []string
		want map[int]bool
	}{
		{"own port in argv", Service{Name: "app"}, []string{"serve", ":{{port:app:8080}}"}, map[int]bool{8080: true}},
		{"own port in env", Service{Name: "kv", Env: map[string]string{"PORT": "{{port:kv:11211}}"}}, nil, map[int]bool{11211: true}},
		{"other service's port is not ours", Service{Name: "app"}, []string{"{{port:db:3306}}", "{{addr:app:80}}"}, map[int]bool{}},
		{"literal port stays", Service{Name: "app"}, []string{"-p", "8080"}, map[int]bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := RelocatedPorts(tc.svc, tc.argv); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RelocatedPorts = %v, want %v", got, tc.want)
			}
		})
	}
}

func validSpec() DeploySpec {
	return DeploySpec{RunID: "r1", Network: NetworkPublished, Data: DataLayer,
		Services: []Service{{Name: "app", Image: "img", Command: []string{"x"}, Ports: []int{80}}}}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		desc    string
		rt      Runtime
		mut     func(*DeploySpec)
		wantErr string
	}{
		{"valid docker spec", RuntimeDocker, func(*DeploySpec) {}, ""},
		{"valid host spec", RuntimeHost, func(s *DeploySpec) { s.Network = NetworkHost }, ""},
		{"empty run id", RuntimeDocker, func(s *DeploySpec) { s.RunID = "" }, "empty run id"},
		{"run id with a slash", RuntimeDocker, func(s *DeploySpec) { s.RunID = "a/b" }, "run id"},
		{"unknown network", RuntimeDocker, func(s *DeploySpec) { s.Network = "macvlan" }, `unknown network mode "macvlan"`},
		{"container-ip on the host runtime", RuntimeHost, func(s *DeploySpec) { s.Network = NetworkContainerIP }, `network "container-ip" needs containers`},
		{"unknown data placement", RuntimeDocker, func(s *DeploySpec) { s.Data = "nfs" }, `unknown data placement "nfs"`},
		{"no services", RuntimeDocker, func(s *DeploySpec) { s.Services = nil }, "no services"},
		{"duplicate service", RuntimeDocker, func(s *DeploySpec) { s.Services = append(s.Services, s.Services[0]) }, "appears twice"},
		{"docker service without image", RuntimeDocker, func(s *DeploySpec) { s.Services[0].Image = "" }, "has no image"},
		{"host service without command", RuntimeHost, func(s *DeploySpec) { s.Network = NetworkHost; s.Services[0].Command = nil }, "no command"},
		{"bad port", RuntimeDocker, func(s *DeploySpec) { s.Services[0].Ports = []int{70000} }, "out of range"},
		{"ready port not declared", RuntimeDocker, func(s *DeploySpec) { s.Services[0].Ready = &ReadyCheck{Port: 81} }, "not in Ports"},
		{"relative data dir in a container", RuntimeDocker, func(s *DeploySpec) { s.Services[0].DataDir = "data" }, "absolute"},
		{"front without ports (a tool used through Exec) is fine", RuntimeDocker, func(s *DeploySpec) { s.Services[0].Ports = nil }, ""},
		{"negative memory", RuntimeDocker, func(s *DeploySpec) { s.Services[0].Resources.MemoryBytes = -1 }, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := validSpec()
			tc.mut(&s)
			err := ValidateSpec(tc.rt, s)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateSpec: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateSpec error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestContainerConfigsEntrypoint(t *testing.T) {
	spec := DeploySpec{RunID: "r1", Network: NetworkContainerIP, Data: DataLayer, Services: []Service{{
		Name: "app", Image: "mine:1", Ports: []int{80},
		Entrypoint: []string{"/bin/app", "--port={{port:app:80}}"}, Command: []string{"--listen={{listen:app}}"}}}}
	b := Bindings{"app": {Host: "ctrperf-r1-app", PortsIdentity: true}}
	cfg, _, _, err := containerConfigs(spec, 0, b, "/b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual([]string(cfg.Entrypoint), []string{"/bin/app", "--port=80"}) || !reflect.DeepEqual([]string(cfg.Cmd), []string{"--listen=0.0.0.0"}) {
		t.Errorf("entrypoint %v cmd %v", cfg.Entrypoint, cfg.Cmd)
	}
	// No override keeps the image's own.
	spec.Services[0].Entrypoint, spec.Services[0].Command = nil, nil
	if cfg, _, _, err = containerConfigs(spec, 0, b, "/b", nil); err != nil || cfg.Entrypoint != nil || cfg.Cmd != nil {
		t.Errorf("no override: entrypoint %v cmd %v (%v)", cfg.Entrypoint, cfg.Cmd, err)
	}
}

func TestContainerConfigs(t *testing.T) {
	ext := &externalNet{HostIP: netip.MustParseAddr("198.18.3.1")}
	two := func(s *DeploySpec) {
		s.Services = append(s.Services, Service{Name: "db", Image: "db", Ports: []int{3306}, DataDir: "/var/lib/db"})
		s.Services[0].Env = map[string]string{"DB": "{{addr:db:3306}}"}
	}
	tests := []struct {
		desc  string
		mut   func(*DeploySpec)
		i     int
		check func(t *testing.T, cfgEnv []string, hc hostCfg)
	}{
		{"published binds loopback on a daemon-chosen port", func(*DeploySpec) {}, 0, func(t *testing.T, _ []string, hc hostCfg) {
			want := network.PortMap{network.MustParsePort("80/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: ""}}}
			if !reflect.DeepEqual(hc.ports, want) {
				t.Errorf("PortBindings = %v, want %v", hc.ports, want)
			}
			if hc.netMode != "ctrperf-r1" {
				t.Errorf("NetworkMode = %q, want the run network", hc.netMode)
			}
		}},
		{"published-external binds the veth's host side", func(s *DeploySpec) { s.Network = NetworkPublishedExternal }, 0, func(t *testing.T, _ []string, hc hostCfg) {
			if b := hc.ports[network.MustParsePort("80/tcp")]; len(b) != 1 || b[0].HostIP.String() != "198.18.3.1" {
				t.Errorf("PortBindings = %v, want 198.18.3.1", hc.ports)
			}
		}},
		{"container-ip publishes nothing", func(s *DeploySpec) { s.Network = NetworkContainerIP }, 0, func(t *testing.T, _ []string, hc hostCfg) {
			if len(hc.ports) != 0 {
				t.Errorf("PortBindings = %v, want none", hc.ports)
			}
		}},
		{"host network", func(s *DeploySpec) { s.Network = NetworkHost }, 0, func(t *testing.T, _ []string, hc hostCfg) {
			if hc.netMode != "host" || len(hc.ports) != 0 {
				t.Errorf("NetworkMode = %q ports %v, want host and none", hc.netMode, hc.ports)
			}
		}},
		{"only the front service is published", two, 1, func(t *testing.T, _ []string, hc hostCfg) {
			if len(hc.ports) != 0 {
				t.Errorf("db PortBindings = %v, want none", hc.ports)
			}
		}},
		{"env templates expand to the other container's name", two, 0, func(t *testing.T, env []string, _ hostCfg) {
			if !reflect.DeepEqual(env, []string{"DB=ctrperf-r1-db:3306"}) {
				t.Errorf("Env = %v", env)
			}
		}},
		{"volume placement", func(s *DeploySpec) { two(s); s.Data = DataVolume }, 1, func(t *testing.T, _ []string, hc hostCfg) {
			want := []mount.Mount{{Type: mount.TypeVolume, Source: "ctrperf-r1-db", Target: "/var/lib/db"}}
			if !reflect.DeepEqual(hc.mounts, want) {
				t.Errorf("Mounts = %+v, want %+v", hc.mounts, want)
			}
		}},
		{"bind placement", func(s *DeploySpec) { two(s); s.Data = DataBind }, 1, func(t *testing.T, _ []string, hc hostCfg) {
			want := []mount.Mount{{Type: mount.TypeBind, Source: "/b/r1/db", Target: "/var/lib/db"}}
			if !reflect.DeepEqual(hc.mounts, want) {
				t.Errorf("Mounts = %+v, want %+v", hc.mounts, want)
			}
		}},
		{"tmpfs placement", func(s *DeploySpec) { two(s); s.Data = DataTmpfs }, 1, func(t *testing.T, _ []string, hc hostCfg) {
			if _, ok := hc.tmpfs["/var/lib/db"]; !ok || len(hc.mounts) != 0 {
				t.Errorf("Tmpfs = %v mounts %v, want /var/lib/db only", hc.tmpfs, hc.mounts)
			}
		}},
		{"layer placement mounts nothing", func(s *DeploySpec) { two(s) }, 1, func(t *testing.T, _ []string, hc hostCfg) {
			if len(hc.mounts) != 0 || len(hc.tmpfs) != 0 {
				t.Errorf("mounts %v tmpfs %v, want none", hc.mounts, hc.tmpfs)
			}
		}},
		{"resources", func(s *DeploySpec) {
			s.Services[0].Resources = Resources{CPUSet: "1", CPUShares: 512, CPUs: 0.5, MemoryBytes: 64 << 20}
		}, 0, func(t *testing.T, _ []string, hc hostCfg) {
			want := hostCfg{cpuset: "1", shares: 512, nano: 500000000, mem: 64 << 20}
			got := hostCfg{cpuset: hc.cpuset, shares: hc.shares, nano: hc.nano, mem: hc.mem}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("resources = %+v, want %+v", got, want)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := validSpec()
			tc.mut(&s)
			b := Bindings{}
			for _, sv := range s.Services {
				b[sv.Name] = ServiceBinding{Host: ObjectName(s.RunID, sv.Name), PortsIdentity: true, DataDir: sv.DataDir}
			}
			cfg, hc, _, err := containerConfigs(s, tc.i, b, "/b", ext)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Labels[LabelManaged] != "true" || cfg.Labels[LabelRun] != "r1" || cfg.Labels[LabelService] != s.Services[tc.i].Name {
				t.Errorf("labels = %v", cfg.Labels)
			}
			tc.check(t, cfg.Env, hostCfg{ports: hc.PortBindings, netMode: string(hc.NetworkMode), mounts: hc.Mounts, tmpfs: hc.Tmpfs,
				cpuset: hc.CpusetCpus, shares: hc.CPUShares, nano: hc.NanoCPUs, mem: hc.Memory})
		})
	}
}

type hostCfg struct {
	ports   network.PortMap
	netMode string
	mounts  []mount.Mount
	tmpfs   map[string]string
	cpuset  string
	shares  int64
	nano    int64
	mem     int64
}

func TestResourceWrites(t *testing.T) {
	all := Resources{CPUSet: "0-1", CPUShares: 1024, CPUs: 1.5, MemoryBytes: 1 << 30}
	tests := []struct {
		desc       string
		controller string
		v2         bool
		res        Resources
		want       []cgroupWrite
	}{
		{"v1 cpuset", "cpuset", false, all, []cgroupWrite{{"cpuset.cpus", "0-1"}}},
		{"v1 cpu shares and quota", "cpu", false, all, []cgroupWrite{{"cpu.shares", "1024"}, {"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "150000"}}},
		{"v1 memory", "memory", false, all, []cgroupWrite{{"memory.limit_in_bytes", "1073741824"}}},
		{"v1 controller without knobs", "blkio", false, all, nil},
		{"no limits write nothing", "cpu", false, Resources{}, nil},
		{"v2 all", "", true, all, []cgroupWrite{{"cpuset.cpus", "0-1"}, {"cpu.weight", "39"}, {"cpu.max", "150000 100000"}, {"memory.max", "1073741824"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := resourceWrites(tc.controller, tc.v2, tc.res); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("resourceWrites = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFreeExternalSlot(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		desc string
		used []netip.Addr
		want int
	}{
		{"nothing used", nil, 0},
		{"other ranges ignored", []netip.Addr{a("127.0.0.1"), a("172.17.0.1")}, 0},
		{"first two taken", []netip.Addr{a("198.18.0.1"), a("198.18.1.2")}, 2},
		{"rolls into 198.19", func() []netip.Addr {
			var u []netip.Addr
			for i := 0; i < 256; i++ {
				h, _ := externalSlot(i)
				u = append(u, h)
			}
			return u
		}(), 256},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := freeExternalSlot(tc.used)
			if err != nil || got != tc.want {
				t.Errorf("freeExternalSlot = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	h, p := externalSlot(256)
	if h.String() != "198.19.0.1" || p.String() != "198.19.0.2" {
		t.Errorf("slot 256 = %s/%s", h, p)
	}
}

func TestExternalNamesFitInterfaceLimit(t *testing.T) {
	ns, h, p := externalNames("a-very-long-run-id-0123456789abcdef")
	for _, n := range []string{h, p} {
		if len(n) > 15 || !strings.HasPrefix(n, NamePrefix) {
			t.Errorf("interface name %q: want <= 15 characters starting with %s", n, NamePrefix)
		}
	}
	if !strings.HasPrefix(ns, NamePrefix+"-") {
		t.Errorf("netns name %q", ns)
	}
	if n2, _, _ := externalNames("other"); n2 == ns {
		t.Error("two run ids share a namespace name")
	}
}

func TestMakeCgroupsFakeV1(t *testing.T) {
	root := t.TempDir()
	for _, c := range []string{"cpu", "cpuset", "memory"} {
		if err := os.MkdirAll(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cpuset", "cpuset.cpus"), []byte("0-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cpuset", "cpuset.mems"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A real cgroupfs creates the knob files with a new directory; a plain
	// directory does not, so pre-create the cpuset ones empty as the kernel would.
	for _, d := range []string{"ctrperf", "ctrperf/r1", "ctrperf/r1/app"} {
		p := filepath.Join(root, "cpuset", d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := os.WriteFile(filepath.Join(p, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The same for the knobs the resources write: kernel.WriteFile, like
	// the kernel, creates no control file.
	for _, f := range []string{"cpu/ctrperf/r1/app/cpu.shares", "memory/ctrperf/r1/app/memory.limit_in_bytes"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := NewBareMetal(WithHostKernel(kernel.NewFS(kernel.Roots{Cgroup: root})))
	groups, runGroups, rel, err := h.cgroupDirs("r1", "app")
	if err != nil {
		t.Fatal(err)
	}
	if rel != "/ctrperf/r1/app" || len(groups) != 3 || len(runGroups) != 3 {
		t.Fatalf("cgroupDirs = %v %v %q, want 3 mounted controllers (cpuacct, blkio missing)", groups, runGroups, rel)
	}
	procs, err := h.makeCgroups(groups, runGroups, Resources{CPUSet: "1", CPUShares: 256, MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 3 || !strings.HasSuffix(procs[0], "/ctrperf/r1/app/cgroup.procs") {
		t.Errorf("procs = %v", procs)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	checks := map[string]string{
		"cpuset/ctrperf/cpuset.cpus":                  "0-1", // inherited so the level accepts children
		"cpuset/ctrperf/r1/cpuset.mems":               "0",
		"cpuset/ctrperf/r1/app/cpuset.cpus":           "1",
		"cpuset/ctrperf/r1/app/cpuset.mems":           "0",
		"cpu/ctrperf/r1/app/cpu.shares":               "256",
		"memory/ctrperf/r1/app/memory.limit_in_bytes": "1048576",
	}
	for p, want := range checks {
		if got := read(p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

func TestCheckPortFreeNamesThePort(t *testing.T) {
	ports, err := allocatePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPortFree(ports[0], "app"); err != nil {
		t.Fatalf("free port reported busy: %v", err)
	}
	l, err := listenAll(ports[0])
	if err != nil {
		t.Skipf("cannot hold port %d: %v", ports[0], err)
	}
	defer l.Close()
	err = checkPortFree(ports[0], "app")
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), itoa(ports[0])) {
		t.Errorf("busy port error = %v, want one naming port %d", err, ports[0])
	}
}

func TestHostBindings(t *testing.T) {
	svcs := []Service{
		{Name: "app", Ports: []int{8080}, HostCommand: []string{"serve", ":{{port:app:8080}}", "{{addr:db:3306}}"}},
		{Name: "db", Ports: []int{3306}, Env: map[string]string{"PORT": "{{port:db:3306}}"}},
	}
	b, err := hostBindings(svcs, hostArgv, func(s Service) string { return "/d/" + s.Name })
	if err != nil {
		t.Fatal(err)
	}
	if b["app"].Ports[8080] == 8080 || b["app"].Ports[8080] == 0 || b["db"].Ports[3306] == 0 {
		t.Errorf("ports not relocated: %+v", b)
	}
	if b["app"].Ports[8080] == b["db"].Ports[3306] {
		t.Error("two services got the same port")
	}
	got, err := b.ExpandAll(svcs[0].HostCommand)
	if err != nil {
		t.Fatal(err)
	}
	if got[2] != "127.0.0.1:"+itoa(b["db"].Ports[3306]) {
		t.Errorf("addr of db = %q", got[2])
	}
}

func TestParseLoopbackRules(t *testing.T) {
	tests := []struct {
		desc  string
		runID string
		want  []loopbackRuleRef
	}{
		{"one run, quoted comment", "run-a", []loopbackRuleRef{{"run-a", 32803}}},
		{"one run, unquoted comment", "run-b", []loopbackRuleRef{{"run-b", 32810}}},
		{"every run, never someone else's or Docker's", "", []loopbackRuleRef{{"run-a", 32803}, {"run-b", 32810}}},
		{"unknown run", "run-c", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "iptables", "nat-output"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := parseLoopbackRules(f, tc.runID); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseLoopbackRules = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeIPTables records calls and answers -S with a fixture.
type fakeIPTables struct {
	list  string
	calls [][]string
	err   error
}

func (f *fakeIPTables) run(_ context.Context, args ...string) ([]byte, error) {
	f.calls = append(f.calls, args)
	if f.err != nil {
		return nil, f.err
	}
	if len(args) > 2 && args[2] == "-S" {
		return []byte(f.list), nil
	}
	return nil, nil
}

func TestLoopbackRulesRoundTrip(t *testing.T) {
	f := &fakeIPTables{}
	if err := addLoopbackRule(context.Background(), f.run, "run-a", 32803); err != nil {
		t.Fatal(err)
	}
	added := strings.Join(f.calls[0], " ")
	if !strings.HasPrefix(added, "-t nat -I OUTPUT 1 ") {
		t.Fatalf("add = %q, want inserted first in nat OUTPUT", added)
	}
	// What iptables -S prints back for the added rule must parse and delete
	// with exactly the same arguments.
	f.list = "-A OUTPUT " + strings.Join(loopbackRule("run-a", 32803)[:11], " ") + ` "ctrperf.run=run-a" -j RETURN` + "\n"
	removed, err := removeLoopbackRules(context.Background(), f.run, "run-a", false, nil)
	if err != nil || len(removed) != 1 {
		t.Fatalf("remove = %v, %v", removed, err)
	}
	del := strings.Join(f.calls[len(f.calls)-1], " ")
	if del != strings.Replace(added, "-I OUTPUT 1", "-D OUTPUT", 1) {
		t.Errorf("delete = %q, want the added rule %q", del, added)
	}
	f.err = errors.New("xtables lock held")
	if _, err := removeLoopbackRules(context.Background(), f.run, "run-a", false, nil); err == nil {
		t.Error("iptables failure not reported")
	}
}

func TestIPTablesChainRace(t *testing.T) {
	tests := []struct {
		desc string
		msg  string
		want bool
	}{
		{"chain flushed by a starting dockerd (nf_tables)", "Failed to program NAT chain: Failed to inject DOCKER in PREROUTING chain: iptables failed: iptables --wait -t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER: iptables v1.8.9 (nf_tables): Chain 'DOCKER' does not exist", true},
		{"chain flushed (legacy message)", "Failed to Setup IP tables: Unable to enable SKIP DNAT rule:  (iptables failed: iptables --wait -t nat -I DOCKER -i br-216dea205cef -j RETURN: iptables: No chain/target/match by that name.", true},
		{"address pool exhausted is not transient", "could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network", false},
		{"a name clash is not transient", "network with name ctrperf-x already exists", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := iptablesChainRace(errors.New(tt.msg)); got != tt.want {
				t.Errorf("iptablesChainRace = %v, want %v", got, tt.want)
			}
		})
	}
}
