package observe

import (
	"context"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// fakeClock ticks only when the test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	ch  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ch: make(chan time.Time)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTicker(time.Duration) (<-chan time.Time, func()) { return f.ch, func() {} }

func (f *fakeClock) advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return f.now
}

// copyTree replaces dst by a copy of src, symlinks included (proc/self).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}

// runFixture observes testdata/<name>/t0 then t1, dt apart, and returns
// the series (one sample).
func runFixture(t *testing.T, name string, dt time.Duration, opts ...Option) *results.Series {
	t.Helper()
	root := t.TempDir()
	roots := []string{"proc", "sys", "cgroup"}
	load := func(snap string) {
		for _, r := range roots {
			src := filepath.Join("testdata", name, snap, r)
			if _, err := os.Stat(src); err == nil {
				copyTree(t, src, filepath.Join(root, r))
			}
		}
	}
	load("t0")
	clk := newFakeClock()
	got := make(chan results.Sample, 1)
	o := New(append([]Option{
		WithKernel(kernel.NewFS(kernel.Roots{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Cgroup: filepath.Join(root, "cgroup")})),
		WithClock(clk), WithInterval(dt),
		WithOnSample(func(s results.Sample) { got <- s }),
	}, opts...)...)
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	load("t1")
	clk.ch <- clk.advance(dt)
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no sample after a tick")
	}
	s := o.Stop()
	if len(s.Samples) != 1 {
		t.Fatalf("got %d samples, want 1", len(s.Samples))
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func checkFloat(t *testing.T, what string, got, want float64) {
	t.Helper()
	if !near(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

const v1Container = "1d7107905f98d3042d70f809dc1bdb660d4e48761004936df6c652518a7f6ecf"

func TestObserverHostV1Fixture(t *testing.T) {
	s := runFixture(t, "host-v1", 2*time.Second,
		WithContainers([]Container{
			{Name: "web", CgroupPath: "/docker/" + v1Container},
			{Name: "gone", CgroupPath: "/docker/0000"},
		}))
	smp := s.Samples[0]
	if smp.T != 2 || s.IntervalS != 2 {
		t.Errorf("T = %v, interval %v; want 2, 2", smp.T, s.IntervalS)
	}
	page := float64(os.Getpagesize())

	// /proc/stat: all-CPU deltas user 53 system 143 idle 137 iowait 2
	// softirq 59 ticks, 394 in all; cpu1: 27 72 68 2 27 = 196.
	all := smp.CPU["all"]
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"all user", all.User, 100 * 53.0 / 394},
		{"all system", all.System, 100 * 143.0 / 394},
		{"all idle", all.Idle, 100 * 137.0 / 394},
		{"all iowait", all.IOWait, 100 * 2.0 / 394},
		{"all softirq", all.SoftIRQ, 100 * 59.0 / 394},
		{"all irq", all.IRQ, 0},
		{"cpu1 user", smp.CPU["cpu1"].User, 100 * 27.0 / 196},
		{"cpu1 softirq", smp.CPU["cpu1"].SoftIRQ, 100 * 27.0 / 196},
		{"ctxt/s", smp.ContextSwitchesPerS, (1938837 - 1842910) / 2.0},
		{"runq", smp.RunQueue, 1},
		{"mem used", smp.MemUsedBytes, (24684096 - 24201404) * 1024},
		{"mem available", smp.MemAvailableBytes, 24201404 * 1024},
		// diskstats vda: +100 reads, +12800 sectors, +12 ms; +600 writes,
		// +76800 sectors, +59 ms; io_ticks +56, weighted +81.
		{"vda r/s", smp.Disks["vda"].ReadsPerS, 50},
		{"vda rkB/s", smp.Disks["vda"].ReadKBPerS, 3200},
		{"vda r_await", smp.Disks["vda"].ReadAwaitMs, 0.12},
		{"vda w/s", smp.Disks["vda"].WritesPerS, 300},
		{"vda wkB/s", smp.Disks["vda"].WriteKBPerS, 19200},
		{"vda w_await", smp.Disks["vda"].WriteAwaitMs, 59.0 / 600},
		{"vda aqu-sz", smp.Disks["vda"].AvgQueueSize, 0.0405},
		{"vda util", smp.Disks["vda"].UtilPercent, 2.8},
		{"vda areq-sz", smp.Disks["vda"].AvgRequestKB, (12800 + 76800) / 2.0 / 700}, // sectors / 2 / requests
		{"vda await", smp.Disks["vda"].AwaitMs, (12 + 59) / 700.0},
		{"vda rrqm/s", smp.Disks["vda"].ReadMergedPerS, 0}, // merge counters did not move
		{"vda wrqm/s", smp.Disks["vda"].WriteMergedPerS, 0},
		// cgroup v1: cpuacct +1019612416 ns, nr_throttled +20,
		// throttled_time +847441614 ns, blkio read +6553600, write +39321600.
		{"web cpu", smp.Containers["web"].CPUPercent, 1019612416 / 1e9 / 2 * 100},
		{"web throttled", smp.Containers["web"].ThrottledPeriods, 20},
		{"web throttled s", smp.Containers["web"].ThrottledS, 0.847441614},
		{"web mem", smp.Containers["web"].MemBytes, 7380992},
		{"web read B/s", smp.Containers["web"].BlkReadBPerS, 3276800},
		{"web write B/s", smp.Containers["web"].BlkWriteBPerS, 19660800},
		// docker-proxy 25794: +105 ticks; 30001 started during the
		// interval with 8 ticks.
		{"docker-proxy cpu", smp.Processes["docker-proxy"].CPUPercent, (105 + 8) / 100.0 / 2 * 100},
		{"docker-proxy rss", smp.Processes["docker-proxy"].RSSBytes, 2 * 878 * page},
		{"containerd cpu", smp.Processes["containerd"].CPUPercent, 0.5},
		{"dockerd cpu", smp.Processes["dockerd"].CPUPercent, 0},
		{"loadgen rss", smp.Processes["loadgen"].RSSBytes, 959 * page},
	} {
		checkFloat(t, c.what, c.got, c.want)
	}
	for name, want := range map[string]int{"docker-proxy": 2, "containerd-shim": 1, "dockerd": 1, "containerd": 1, "loadgen": 1} {
		if got := smp.Processes[name].Count; got != want {
			t.Errorf("%s count = %d, want %d", name, got, want)
		}
	}
	// Interrupts: block requests on CPU1 (+703), NIC tx (+3); idle IRQs left out.
	if got := smp.Interrupts["36:virtio1-req.0"]; len(got) != 2 || got[0] != 0 || got[1] != 703/2.0 {
		t.Errorf("IRQ 36 = %v, want [0 351.5]", got)
	}
	if got := smp.Interrupts["LOC"]; len(got) != 2 || got[0] != (250346-244751)/2.0 {
		t.Errorf("LOC = %v", got)
	}
	if _, ok := smp.Interrupts["38:virtio2-input.0"]; ok {
		t.Error("idle IRQ 38 reported")
	}
	if got := smp.Softirqs["NET_RX"]; len(got) != 2 || got[0] != (124687-61873)/2.0 || got[1] != (124426-67064)/2.0 {
		t.Errorf("NET_RX = %v", got)
	}
	if got := smp.Softirqs["HI"]; len(got) != 2 || got[0] != 0 {
		t.Errorf("HI = %v, want zeros kept", got)
	}
	// Never-used loop devices are hidden, as iostat does.
	if _, ok := smp.Disks["loop0"]; ok {
		t.Error("unused loop0 reported")
	}
	// The missing container is data, not an abort.
	if !strings.Contains(s.Unavailable["containers/gone"], "cpuacct.usage") {
		t.Errorf("unavailable = %v, want containers/gone naming cpuacct.usage", s.Unavailable)
	}
	if _, ok := s.Unavailable["cpu"]; ok {
		t.Errorf("cpu unavailable: %v", s.Unavailable)
	}
}

func TestObserverDisksMulti(t *testing.T) {
	type want struct{ rs, rkb, raw, ws, wkb, waw, aqu, util float64 }
	for _, tc := range []struct {
		desc    string
		opts    []Option
		present map[string]want
		absent  []string
	}{
		{
			desc: "whole devices with I/O, iostat defaults",
			present: map[string]want{
				"vda":   {100, 6400, 0.12, 600, 38400, 59.0 / 600, 0.081, 5.6},
				"loop0": {0, 0, 0, 400, 51200, 2, 0.8, 95},
				"loop2": {0, 0, 0, 40, 4096, 2, 0.08, 9},
				"dm-0":  {10, 160, 0.5, 250, 10000, 4, 1.005, 98},
				"dm-1":  {0, 0, 0, 30, 120, 0.1, 0.003, 100},
			},
			absent: []string{"loop1", "vda1", "dm-2"},
		},
		{
			desc: "partitions included on request",
			opts: []Option{WithPartitions(true)},
			present: map[string]want{
				"vda1": {100, 6000, 0.1, 600, 38500, 60.0 / 600, 0.08, 5.6},
			},
			absent: []string{"loop1"},
		},
		{
			desc: "named devices only, even never-used ones",
			opts: []Option{WithDevices([]string{"loop1", "dm-0"})},
			present: map[string]want{
				"loop1": {},
				"dm-0":  {10, 160, 0.5, 250, 10000, 4, 1.005, 98},
			},
			absent: []string{"vda", "loop0"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := runFixture(t, "disks-multi", time.Second, tc.opts...)
			disks := s.Samples[0].Disks
			for dev, w := range tc.present {
				d, ok := disks[dev]
				if !ok {
					t.Errorf("%s missing (have %v)", dev, sortedKeys(disks))
					continue
				}
				got := want{d.ReadsPerS, d.ReadKBPerS, d.ReadAwaitMs, d.WritesPerS, d.WriteKBPerS, d.WriteAwaitMs, d.AvgQueueSize, d.UtilPercent}
				for i, g := range []float64{got.rs, got.rkb, got.raw, got.ws, got.wkb, got.waw, got.aqu, got.util} {
					wv := []float64{w.rs, w.rkb, w.raw, w.ws, w.wkb, w.waw, w.aqu, w.util}[i]
					if !near(g, wv) {
						t.Errorf("%s: got %+v, want %+v", dev, got, w)
						break
					}
				}
			}
			for _, dev := range tc.absent {
				if _, ok := disks[dev]; ok {
					t.Errorf("%s reported, want hidden", dev)
				}
			}
			// Only diskstats exist in this tree: the other samplers are
			// unavailable and say why, the disk sampler carried on.
			if _, ok := s.Unavailable["disk"]; ok {
				t.Errorf("disk unavailable: %v", s.Unavailable["disk"])
			}
			if !strings.Contains(s.Unavailable["cpu"], "stat") {
				t.Errorf("cpu unavailable reason = %q, want it to name the stat file", s.Unavailable["cpu"])
			}
		})
	}
}

func TestObserverCgroupV2Fixture(t *testing.T) {
	path := "/system.slice/docker-5f0c3a9e1b7d4c2a8e6f9b0d1c3e5a7f9b2d4c6e8a0b1d3f5e7a9c0b2d4e6f81.scope"
	s := runFixture(t, "cgroup-v2", 2*time.Second, WithContainers([]Container{{Name: "db", CgroupPath: path}}))
	c, ok := s.Samples[0].Containers["db"]
	if !ok {
		t.Fatalf("no container db; unavailable %v", s.Unavailable)
	}
	checkFloat(t, "cpu", c.CPUPercent, 75)                             // +1.5 s of usage_usec in 2 s
	checkFloat(t, "throttled periods", c.ThrottledPeriods, 12)         // nr_throttled 37 -> 49
	checkFloat(t, "throttled s", c.ThrottledS, 0.6)                    // throttled_usec +600000
	checkFloat(t, "mem", c.MemBytes, 75235328)                         // memory.current
	checkFloat(t, "read B/s", c.BlkReadBPerS, 410624/2.0)              // rbytes summed over devices
	checkFloat(t, "write B/s", c.BlkWriteBPerS, (6291456+2097152)/2.0) // wbytes summed over devices
	if _, ok := s.Unavailable["containers/db"]; ok {
		t.Errorf("db unavailable: %v", s.Unavailable["containers/db"])
	}
	// No proc tree at all: every proc sampler is unavailable, none aborted the rest.
	for _, name := range []string{"cpu", "memory", "disk", "interrupts", "softirqs", "processes"} {
		if s.Unavailable[name] == "" {
			t.Errorf("%s not marked unavailable: %v", name, s.Unavailable)
		}
	}
}

func TestObserverLifecycle(t *testing.T) {
	t.Run("stop without start gives an empty series", func(t *testing.T) {
		s := New(WithInterval(500 * time.Millisecond)).Stop()
		if s == nil || len(s.Samples) != 0 || s.IntervalS != 0.5 {
			t.Fatalf("got %+v", s)
		}
	})
	t.Run("a stop right after the last tick adds nothing", func(t *testing.T) {
		clk := newFakeClock()
		o := New(WithClock(clk), WithInterval(time.Second), WithKernel(kernel.NewFS(kernel.Roots{Proc: t.TempDir(), Sys: t.TempDir(), Cgroup: t.TempDir()})))
		if err := o.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.advance(50 * time.Millisecond)
		if s := o.Stop(); len(s.Samples) != 0 {
			t.Fatalf("samples = %+v, want none", s.Samples)
		}
	})
	t.Run("start twice fails, stop twice is fine", func(t *testing.T) {
		clk := newFakeClock()
		o := New(WithClock(clk), WithKernel(kernel.NewFS(kernel.Roots{Proc: t.TempDir(), Sys: t.TempDir(), Cgroup: t.TempDir()})))
		if err := o.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := o.Start(context.Background()); err == nil {
			t.Error("second Start succeeded")
		}
		o.Stop()
		o.Stop()
	})
	t.Run("stop keeps a last partial interval of a tenth or more", func(t *testing.T) {
		clk := newFakeClock()
		o := New(WithClock(clk), WithInterval(time.Second), WithKernel(kernel.NewFS(kernel.Roots{Proc: t.TempDir(), Sys: t.TempDir(), Cgroup: t.TempDir()})))
		if err := o.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.advance(200 * time.Millisecond)
		s := o.Stop()
		if len(s.Samples) != 1 || !near(s.Samples[0].T, 0.2) {
			t.Fatalf("samples = %+v, want one at 0.2 s", s.Samples)
		}
		if s.Unavailable["cpu"] == "" {
			t.Errorf("cpu over an empty root not unavailable: %v", s.Unavailable)
		}
	})
}

func TestObserverSetContainers(t *testing.T) {
	root := t.TempDir()
	copyTree(t, "testdata/host-v1/t0", root)
	clk := newFakeClock()
	got := make(chan results.Sample, 4)
	o := New(WithClock(clk), WithKernel(kernel.NewFS(kernel.Roots{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Cgroup: filepath.Join(root, "cgroup")})),
		WithOnSample(func(s results.Sample) { got <- s }))
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.SetContainers([]Container{{Name: "web", CgroupPath: "/docker/" + v1Container}})
	clk.ch <- clk.advance(time.Second) // first reading of the container: no rate yet
	if s := <-got; len(s.Containers) != 0 {
		t.Errorf("rate on the first reading: %+v", s.Containers)
	}
	copyTree(t, "testdata/host-v1/t1", root)
	clk.ch <- clk.advance(time.Second)
	s := <-got
	checkFloat(t, "web cpu", s.Containers["web"].CPUPercent, 1019612416/1e9*100)
	o.Stop()
}

func TestProcessGroupsOnFixture(t *testing.T) {
	s := runFixture(t, "host-v1", 2*time.Second, WithProcessGroups(map[string]ProcessMatcher{
		"proxy of port 32768": MatchDockerProxyPort(32768),
		"proxy of port 9999":  MatchDockerProxyPort(9999),
		"daemons":             MatchComm("dockerd", "containerd"),
		"pids":                MatchPIDs(25809, 3844),
		"shim by exe":         MatchExe("containerd-shim-runc-v2"),
		"proxy by exe":        MatchExe("docker-proxy"),
	}))
	for _, tc := range []struct {
		group string
		cpu   float64
		count int
	}{
		// 25794 only: 30001 is a docker-proxy without a cmdline in the fixture.
		{"proxy of port 32768", 52.5, 1},
		{"proxy of port 9999", 0, 0},
		{"daemons", 0.5, 2},
		{"pids", 0, 2},
		// comm "containerd-shim" is truncated; exe links to the full name.
		{"shim by exe", 0, 1},
		// comm matches but the fixture has no exe link: not a member.
		{"proxy by exe", 0, 0},
	} {
		got, ok := s.Samples[0].Processes[tc.group]
		if !ok || !near(got.CPUPercent, tc.cpu) || got.Count != tc.count {
			t.Errorf("%s: got %+v (present %v), want cpu %v count %d", tc.group, got, ok, tc.cpu, tc.count)
		}
	}
	if _, ok := s.Samples[0].Processes["loadgen"]; ok {
		t.Error("default groups kept although replaced")
	}
}

func TestContainerGoneAfterReading(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		mayGo      bool
		wantFailed bool
	}{
		{"in a benchmark run a vanished container is recorded", false, true},
		{"live, containers may go", true, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, "testdata/host-v1/t0", root)
			clk := newFakeClock()
			got := make(chan results.Sample, 4)
			o := New(WithClock(clk), WithKernel(kernel.NewFS(kernel.Roots{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Cgroup: filepath.Join(root, "cgroup")})),
				WithContainers([]Container{{Name: "web", CgroupPath: "/docker/" + v1Container}}),
				WithContainersMayGo(tc.mayGo), WithOnSample(func(s results.Sample) { got <- s }))
			if err := o.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, c := range []string{"cpu", "cpuacct", "memory", "blkio"} {
				if err := os.RemoveAll(filepath.Join(root, "cgroup", c, "docker", v1Container)); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				clk.ch <- clk.advance(time.Second)
				if s := <-got; len(s.Containers) != 0 {
					t.Errorf("gone container sampled: %+v", s.Containers)
				}
			}
			s := o.Stop()
			if _, failed := s.Unavailable["containers/web"]; failed != tc.wantFailed {
				t.Errorf("unavailable = %v, want containers/web recorded: %v", s.Unavailable, tc.wantFailed)
			}
		})
	}
}

func TestObserverContainerContextSwitches(t *testing.T) {
	path := "/system.slice/docker-5f0c3a9e1b7d4c2a8e6f9b0d1c3e5a7f9b2d4c6e8a0b1d3f5e7a9c0b2d4e6f81.scope"
	s := runFixture(t, "cgroup-v2-ctxsw", 2*time.Second, WithContainers([]Container{{Name: "db", CgroupPath: path}}))
	c, ok := s.Samples[0].Containers["db"]
	if !ok {
		t.Fatalf("no container db; unavailable %v", s.Unavailable)
	}
	checkFloat(t, "voluntary/s", c.VoluntaryCtxSwPerS, 320)     // 101: +600, 102 (new): 40
	checkFloat(t, "involuntary/s", c.InvoluntaryCtxSwPerS, 2.5) // 101: +4, 102: 1
	if u := s.Unavailable["containers/db/ctxsw"]; u != "" {
		t.Errorf("ctxsw unavailable: %s", u)
	}
	sum := results.Summarize(s)
	checkFloat(t, "summary voluntary", sum.Containers["db"].VoluntaryCtxSwPerS.Mean, 320)
}

func TestObserverContainerContextSwitchesUnavailable(t *testing.T) {
	// The plain cgroup-v2 tree has neither cgroup.threads nor /proc: the
	// switches are unavailable and say why; the cgroup's figures stay.
	path := "/system.slice/docker-5f0c3a9e1b7d4c2a8e6f9b0d1c3e5a7f9b2d4c6e8a0b1d3f5e7a9c0b2d4e6f81.scope"
	s := runFixture(t, "cgroup-v2", 2*time.Second, WithContainers([]Container{{Name: "db", CgroupPath: path}}))
	if u := s.Unavailable["containers/db/ctxsw"]; !strings.Contains(u, "cgroup.threads") && !strings.Contains(u, "tasks") {
		t.Errorf("ctxsw unavailable = %q, want it to name the threads file", u)
	}
	c := s.Samples[0].Containers["db"]
	if c.VoluntaryCtxSwPerS != 0 || c.CPUPercent != 75 {
		t.Errorf("got %+v", c)
	}
}
