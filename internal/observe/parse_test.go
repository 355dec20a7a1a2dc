package observe

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

func TestParseBlkioServiceBytes(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		in          string
		read, write uint64
		wantErr     bool
	}{
		{"no I/O yet: only Total", "Total 0\n", 0, 0, false},
		{"two devices summed, Sync/Async/Discard/Total ignored",
			"254:0 Read 100\n254:0 Write 200\n254:0 Sync 300\n254:0 Async 0\n254:0 Discard 7\n254:0 Total 300\n7:0 Read 1\n7:0 Write 2\nTotal 303\n", 101, 202, false},
		{"garbage value", "254:0 Read x\n", 0, 0, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, w, err := parseBlkioServiceBytes(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr || r != tc.read || w != tc.write {
				t.Errorf("got %d %d %v, want %d %d err=%v", r, w, err, tc.read, tc.write, tc.wantErr)
			}
		})
	}
}

func TestParseIOStat(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		in          string
		read, write uint64
		wantErr     bool
	}{
		{"empty file: no I/O", "", 0, 0, false},
		{"summed over devices", "254:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n7:0 rbytes=1 wbytes=2 rios=1 wios=1 dbytes=5 dios=1\n", 11, 22, false},
		{"garbage value", "254:0 rbytes=ten\n", 0, 0, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, w, err := parseIOStat(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr || r != tc.read || w != tc.write {
				t.Errorf("got %d %d %v, want %d %d err=%v", r, w, err, tc.read, tc.write, tc.wantErr)
			}
		})
	}
}

func TestParseFlatKeyed(t *testing.T) {
	kv, err := parseFlatKeyed(strings.NewReader("nr_periods 22\nnr_throttled 19\nthrottled_time 833840860\nbogus line here\n"))
	if err != nil || kv["nr_throttled"] != 19 || kv["throttled_time"] != 833840860 || len(kv) != 3 {
		t.Errorf("got %v %v", kv, err)
	}
	if _, err := parseFlatKeyed(strings.NewReader("usage_usec -1\n")); err == nil {
		t.Error("negative value accepted")
	}
}

func TestIostatX(t *testing.T) {
	base := blockdevice.IOStats{ReadIOs: 10, WriteIOs: 10, ReadSectors: 100, WriteSectors: 100, ReadTicks: 5, WriteTicks: 5, IOsTotalTicks: 50, WeightedIOTicks: 60}
	for _, tc := range []struct {
		desc   string
		cur    blockdevice.IOStats
		dt     float64
		want   results.DiskStats
		wantOK bool
	}{
		{"idle device: zero rates, no await", base, 1, results.DiskStats{}, true},
		{"writes only over 2 s", func() blockdevice.IOStats {
			c := base
			c.WriteIOs, c.WriteSectors, c.WriteTicks, c.IOsTotalTicks, c.WeightedIOTicks = 110, 2148, 405, 1050, 460
			return c
		}(), 2, results.DiskStats{WritesPerS: 50, WriteKBPerS: 512, WriteAwaitMs: 4, AvgQueueSize: 0.2, UtilPercent: 50,
			AvgRequestKB: 1024 / 100.0, AwaitMs: 4}, true},
		{"counter went backwards (device re-created)", blockdevice.IOStats{}, 1, results.DiskStats{}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := iostatX(base, tc.cur, tc.dt)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCPUPercent(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		prev, cur procfs.CPUStat
		want      results.CPUPercent
	}{
		{"no time passed", procfs.CPUStat{User: 1}, procfs.CPUStat{User: 1}, results.CPUPercent{}},
		{"split of 4 s", procfs.CPUStat{}, procfs.CPUStat{User: 1, System: 1, Idle: 1, Iowait: 0.5, SoftIRQ: 0.5},
			results.CPUPercent{User: 25, System: 25, Idle: 25, IOWait: 12.5, SoftIRQ: 12.5}},
		{"iowait going backwards counts as 0", procfs.CPUStat{Iowait: 3}, procfs.CPUStat{Iowait: 2, Idle: 1},
			results.CPUPercent{Idle: 100}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := cpuPercent(tc.prev, tc.cur); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestContainersOf(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		target *engine.Target
		want   []Container
	}{
		{"no target", nil, nil},
		{"service names key the containers; unstarted ones are left out", &engine.Target{Containers: []engine.Container{
			{Name: "ctrperf-r1-app", Service: "app", CgroupPath: "/docker/aaa"},
			{Name: "ctrperf-r1-db", Service: "db", CgroupPath: "/docker/bbb"},
			{Name: "ctrperf-r1-cache", Service: "cache"},
		}}, []Container{{Name: "app", CgroupPath: "/docker/aaa"}, {Name: "db", CgroupPath: "/docker/bbb"}}},
		{"container name without a service", &engine.Target{Containers: []engine.Container{{Name: "x", CgroupPath: "/x"}}},
			[]Container{{Name: "x", CgroupPath: "/x"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ContainersOf(tc.target); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAccountingV2(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		root    string
		v2      bool
		wantErr string
	}{
		{"v1 fixture", "testdata/host-v1/t0/cgroup", false, ""},
		{"v2 fixture", "testdata/cgroup-v2/t0/cgroup", true, ""},
		{"nothing mounted", "testdata/disks-multi/t0", false, "no cgroup v1 (cpuacct) or v2 (cgroup.controllers) hierarchy at testdata/disks-multi/t0"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v2, err := accountingV2(kernel.DetectCgroups(tc.root))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || v2 != tc.v2 {
				t.Errorf("got %v, %v; want %v", v2, err, tc.v2)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	s := &results.Series{
		IntervalS:   1,
		Unavailable: map[string]string{"interrupts": "permission denied"},
		Samples: []results.Sample{
			{
				CPU:       map[string]results.CPUPercent{"all": {User: 10, System: 4, IOWait: 2}},
				Disks:     map[string]results.DiskStats{"vda": {WritesPerS: 100, WriteKBPerS: 800, WriteAwaitMs: 4, UtilPercent: 50}},
				Processes: map[string]results.ProcessStats{"docker-proxy": {CPUPercent: 40, Count: 1}},
				RunQueue:  2,
			},
			{
				CPU:        map[string]results.CPUPercent{"all": {User: 30, System: 8, IOWait: 0}},
				Disks:      map[string]results.DiskStats{"vda": {ReadsPerS: 3, ReadAwaitMs: 1, UtilPercent: 10}},
				Processes:  map[string]results.ProcessStats{"docker-proxy": {CPUPercent: 60, Count: 1}},
				Containers: map[string]results.ContainerStats{"web": {CPUPercent: 90}},
				RunQueue:   4,
			},
		},
	}
	sum := results.Summarize(s)
	for _, c := range []struct {
		what string
		got  results.Figure
		want results.Figure
	}{
		{"cpu user", sum.CPU.User, results.Figure{Mean: 20, Max: 30, N: 2}},
		{"cpu iowait", sum.CPU.IOWait, results.Figure{Mean: 1, Max: 2, N: 2}},
		{"vda w/s", sum.Disks["vda"].WritesPerS, results.Figure{Mean: 50, Max: 100, N: 2}},
		{"vda w_await only over intervals with writes", sum.Disks["vda"].WriteAwaitMs, results.Figure{Mean: 4, Max: 4, N: 1}},
		{"vda r_await only over intervals with reads", sum.Disks["vda"].ReadAwaitMs, results.Figure{Mean: 1, Max: 1, N: 1}},
		{"vda util", sum.Disks["vda"].UtilPercent, results.Figure{Mean: 30, Max: 50, N: 2}},
		{"docker-proxy", sum.Processes["docker-proxy"].CPUPercent, results.Figure{Mean: 50, Max: 60, N: 2}},
		{"container seen once", sum.Containers["web"].CPUPercent, results.Figure{Mean: 90, Max: 90, N: 1}},
		{"run queue", sum.RunQueue, results.Figure{Mean: 3, Max: 4, N: 2}},
	} {
		if c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.what, c.got, c.want)
		}
	}
	if sum.Samples != 2 || sum.Unavailable["interrupts"] == "" {
		t.Errorf("samples %d, unavailable %v", sum.Samples, sum.Unavailable)
	}
	if got := results.Summarize(nil); got.Samples != 0 || got.Disks != nil {
		t.Errorf("nil series: %+v", got)
	}
	// The summary is what reports print: its JSON names must stay stable.
	b, err := json.Marshal(sum.Disks["vda"])
	if err != nil || !strings.Contains(string(b), `"w_await":{"mean":4,"max":4,"n":1}`) {
		t.Errorf("JSON %s %v", b, err)
	}
}

func TestDevices(t *testing.T) {
	root := "testdata/host-v1/t0/"
	got, err := Devices(kernel.NewFS(kernel.Roots{Proc: root + "proc", Sys: root + "sys"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "vda") || !slices.IsSorted(got) {
		t.Errorf("Devices = %v, want vda among them, sorted", got)
	}
	if _, err := Devices(kernel.NewFS(kernel.Roots{Proc: t.TempDir(), Sys: t.TempDir()})); err == nil {
		t.Error("no diskstats: no error")
	}
}

func TestIostatXMergesAndRequestSize(t *testing.T) {
	prev := blockdevice.IOStats{ReadIOs: 100, ReadMerges: 10, ReadSectors: 1000, ReadTicks: 50,
		WriteIOs: 200, WriteMerges: 40, WriteSectors: 8000, WriteTicks: 300}
	cur := prev
	cur.ReadIOs, cur.ReadMerges, cur.ReadSectors, cur.ReadTicks = 150, 30, 2000, 100       // 50 reads, 20 merged, 500 kB, 50 ms
	cur.WriteIOs, cur.WriteMerges, cur.WriteSectors, cur.WriteTicks = 350, 340, 16000, 600 // 150 writes, 300 merged, 4000 kB, 300 ms
	ds, ok := iostatX(prev, cur, 2)
	if !ok {
		t.Fatal("not ok")
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"rrqm/s", ds.ReadMergedPerS, 10},
		{"wrqm/s", ds.WriteMergedPerS, 150},
		{"areq-sz", ds.AvgRequestKB, (500 + 4000) / 200.0},
		{"await", ds.AwaitMs, (50 + 300) / 200.0},
		{"r_await", ds.ReadAwaitMs, 1},
		{"w_await", ds.WriteAwaitMs, 2},
	} {
		checkFloat(t, c.what, c.got, c.want)
	}
}
