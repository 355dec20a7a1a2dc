package report

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

func f(v float64) *float64 { return &v }

func cmpOf(metric string, r, lo, hi float64) stats.Comparison {
	return stats.Comparison{Ratio: f(r), CILow: f(lo), CIHigh: f(hi), Verdict: stats.Verdict(metric, lo, hi)}
}

// handReport is a report of configurations written as literals: the
// headline is a function of the comparisons, not of the bootstrap.
func handReport(runs int, vs map[string]map[string]stats.Comparison) *Report {
	est := func(n int) map[string]stats.Estimate {
		return map[string]stats.Estimate{results.MetricP50Ms: {Median: 2, N: n}, results.MetricP99Ms: {Median: 9, N: n},
			results.MetricThroughput: {Median: 80, N: n}}
	}
	rep := &Report{Baseline: "bare", Configs: []*ConfigResult{{Name: "bare", Runs: 5, Metrics: est(5)}}}
	for _, name := range []string{"same", "slow", "tiny", "broken"} {
		c := &ConfigResult{Name: name, Runs: runs, Metrics: est(runs), VsBaseline: vs[name]}
		if name == "broken" {
			c = &ConfigResult{Name: name, NotRun: 3, Errors: []string{"storage driver btrfs unavailable"}}
		}
		if _, ok := vs[name]; !ok {
			continue
		}
		rep.Configs = append(rep.Configs, c)
	}
	return rep
}

func TestHeadline(t *testing.T) {
	rep := handReport(5, map[string]map[string]stats.Comparison{
		"same": {results.MetricP50Ms: cmpOf(results.MetricP50Ms, 1.01, 0.97, 1.05), results.MetricP99Ms: cmpOf(results.MetricP99Ms, 1.2, 0.9, 1.6),
			results.MetricThroughput: cmpOf(results.MetricThroughput, 1, 0.99, 1.01)},
		"slow": {results.MetricP50Ms: cmpOf(results.MetricP50Ms, 1.22, 1.11, 1.37), results.MetricP99Ms: cmpOf(results.MetricP99Ms, 1.04, 0.95, 1.2),
			results.MetricThroughput: cmpOf(results.MetricThroughput, 0.97, 0.955, 0.985)},
		"broken": {},
	})
	got := headline(rep)
	want := []string{
		// differences first, each with its ratio and interval
		"slow: median latency 1.22× bare [1.11, 1.37], throughput 0.970× [0.955, 0.985]; p99 latency unchanged",
		"same: no measurable difference from bare in median latency, p99 latency or throughput",
		"broken: no result (NOT RUN: storage driver btrfs unavailable)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headline =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHeadlineFewRepetitions(t *testing.T) {
	rep := handReport(3, map[string]map[string]stats.Comparison{
		"slow": {results.MetricP50Ms: cmpOf(results.MetricP50Ms, 1.5, 1.2, 1.9)},
	})
	got := headline(rep)
	if len(got) != 1 || got[0] != "slow: median latency 1.50× bare [1.20, 1.90] (only 3 runs: intervals are approximate below 5)" {
		t.Errorf("headline = %q", got)
	}
	// One repetition: a ratio but no interval, and it says why.
	one := stats.CompareReplicates(stats.Ratio{Sense: stats.SenseOf(results.MetricP50Ms), Level: 0.95,
		Num: stats.Side{Point: 3, N: 1}, Den: stats.Side{Point: 2, N: 5}})
	rep = handReport(1, map[string]map[string]stats.Comparison{"tiny": {results.MetricP50Ms: one}})
	got = headline(rep)
	if len(got) != 1 || got[0] != "tiny: median latency 1.50× of bare, no interval (only 1 repetition: at least 2 on each side are needed)" {
		t.Errorf("headline with one repetition = %q", got)
	}
	// A baseline with no run answers that, not with numbers.
	rep.Configs[0].Runs = 0
	if got := headline(rep); len(got) != 1 || !strings.Contains(got[0], "the baseline bare has no successful run") {
		t.Errorf("headline without a baseline = %q", got)
	}
}

// The fixture's first line names a configuration, a metric, a ratio and
// its interval, in every text format's first lines and the HTML's answer.
func TestReportAnswersFirst(t *testing.T) {
	rep := loadFixture(t)
	line := regexp.MustCompile(`^docker-published: median latency \d+\.\d+× host \[\d+\.\d+, \d+\.\d+\]`)
	for _, format := range []string{"table", "summary", "md", "html"} {
		var buf bytes.Buffer
		if err := Render(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		var first string
		switch format {
		case "md":
			first = strings.TrimPrefix(strings.Split(text, "\n")[2], "- ")
		case "html":
			i := strings.Index(text, `<div class="card answer"><ul><li>`)
			if i < 0 {
				t.Fatalf("html has no answer block")
			}
			first = text[i+len(`<div class="card answer"><ul><li>`):]
		default:
			first = strings.SplitN(text, "\n", 2)[0]
		}
		if !line.MatchString(first) {
			t.Errorf("%s: first line %.120q does not answer", format, first)
		}
	}
}

func TestEnvironmentBlock(t *testing.T) {
	rep := loadFixture(t)
	got := strings.Join(envLines(rep.Env), "\n")
	for _, w := range []string{
		"measured 2026-11-21 09:59 UTC on bench1 with ctrperf v0.9.0 (go1.24.0)",
		"kernel 6.1.0-28-amd64 x86_64, cgroup v2",
		"2 CPUs (Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz), memory 8.0 GiB",
		"Docker engine default: version 20.10.24+dfsg1, storage driver overlay2 on extfs, userland proxy on, data root /var/lib/docker — used by docker-published, docker-host-net, docker-volume-2reps",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("environment lacks %q:\n%s", w, got)
		}
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "html"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"kernel 6.1.0-28-amd64", "version 20.10.24+dfsg1", "storage driver overlay2"} {
		if !strings.Contains(buf.String(), w) { // as written, greppable
			t.Errorf("html lacks %q", w)
		}
	}
	// Without env.json: what the records say, and that the machine is unknown.
	b, err := Build(genRecords(t), WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	lines := envLines(b.Env)
	if !strings.Contains(strings.Join(lines, "\n"), "machine: unknown") || !strings.Contains(strings.Join(lines, "\n"), "version 20.10.24+dfsg1") {
		t.Errorf("environment from records only:\n%s", strings.Join(lines, "\n"))
	}
	// A private engine says so, with its knobs.
	off := false
	l := engineLine(EngineUse{EngineInfo: results.EngineInfo{Runtime: "docker", Name: "ctrperf-smoke-1a2b-btrfs", Version: "20.10.24",
		StorageDriver: "btrfs", DataRoot: "/var/lib/ctrperf/engines/btrfs", UserlandProxy: &off, Private: true}, Configs: []string{"docker-btrfs"}})
	if l != "Docker engine ctrperf-smoke-1a2b-btrfs (private, started by ctrperf): version 20.10.24, storage driver btrfs, userland proxy off, data root /var/lib/ctrperf/engines/btrfs — used by docker-btrfs" {
		t.Errorf("private engine line = %q", l)
	}
	// A nested engine (Docker in Docker) says what it is.
	l = engineLine(EngineUse{EngineInfo: results.EngineInfo{Runtime: "docker", Name: "ctrperf-nested-overlay2-x", Version: "20.10.24",
		StorageDriver: "overlay2", BackingFS: "extfs", DataRoot: "/var/lib/docker", Private: true, Nested: true}, Configs: []string{"docker-in-docker"}})
	if l != "Docker engine ctrperf-nested-overlay2-x (nested: a dockerd in a container of the default engine, started by ctrperf): version 20.10.24, storage driver overlay2 on extfs, data root /var/lib/docker — used by docker-in-docker" {
		t.Errorf("nested engine line = %q", l)
	}
	// Data filesystems: one line per kind, with the configurations on it.
	recs := genRecords(t)
	xfs := results.DataFSInfo{FS: "xfs", Options: []string{"noatime"}, Size: 2 << 30, Device: "/dev/loop3", Applied: []string{"rw", "noatime", "attr2"}}
	for i := range recs {
		if recs[i].Config != "host" {
			d := xfs
			d.Device = fmt.Sprintf("/dev/loop%d", i) // a fresh loop file per run: still one line
			recs[i].DataFS = &d
		}
	}
	b, err = Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	var fsLines []string
	for _, l := range envLines(b.Env) {
		if strings.HasPrefix(l, "data filesystem") {
			fsLines = append(fsLines, l)
		}
	}
	if len(fsLines) != 1 || !strings.HasPrefix(fsLines[0], "data filesystem xfs -o noatime on a 2.0 GiB loop file, mounted rw,noatime,attr2 — used by ") || slices.Contains(strings.Split(strings.SplitN(fsLines[0], "used by ", 2)[1], ", "), "host") {
		t.Errorf("data filesystem lines: %q", fsLines)
	}
}

func TestThresholds(t *testing.T) {
	rep := loadFixture(t)
	req := func(s string) plan.Threshold {
		metric, rule, _ := strings.Cut(s, ": ")
		th, err := plan.ParseRequirement(metric, rule)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	pub := rep.Config("docker-published").VsBaseline[results.MetricP99Ms]
	if pub.CILow == nil || *pub.CILow > 1.3 || *pub.CIHigh < 1.3 {
		t.Fatalf("fixture changed: docker-published p99 ratio %v [%v, %v] should straddle 1.3", *pub.Ratio, pub.CILow, pub.CIHigh)
	}
	// The whole interval is above 1.10: broken, and named.
	err := rep.CheckThresholds([]plan.Threshold{req("p99_ms: < 1.10 x baseline")})
	var te *ThresholdError
	if !errors.As(err, &te) || te.ExitCode() != 3 || len(te.Broken) != 1 || te.Broken[0].Config != "docker-published" {
		t.Fatalf("err = %v, want docker-published broken", err)
	}
	if !strings.Contains(err.Error(), `docker-published p99_ms ratio 1.36× [`) || !strings.Contains(err.Error(), `breaks "p99_ms < 1.1 x host"`) {
		t.Errorf("error does not name ratio, interval and rule: %v", err)
	}
	status := map[string]string{}
	for _, g := range rep.Thresholds {
		status[g.Config] = g.Status
	}
	if status["docker-host-net"] != GateOK || !strings.HasPrefix(status["docker-btrfs"], "not checked: NOT RUN") {
		t.Errorf("statuses = %v", status)
	}
	// The interval straddles 1.3: not evidence of a regression.
	if err := rep.CheckThresholds([]plan.Threshold{req("p99_ms: < 1.3 x baseline")}); err != nil {
		t.Errorf("straddling interval broke the rule: %v", err)
	}
	// A configuration's own rule replaces the plan-wide one for it.
	own := req("p99_ms: < 2 x baseline")
	own.Config = "docker-published"
	if err := rep.CheckThresholds([]plan.Threshold{req("p99_ms: < 1.10 x baseline"), own}); err != nil {
		t.Errorf("per-configuration rule not applied: %v", err)
	}
	// Throughput must not drop by more than 5%: docker-published's 0.85× does.
	if err := rep.CheckThresholds([]plan.Threshold{req("throughput_per_s: > -5%")}); !errors.As(err, &te) {
		t.Errorf("throughput drop not caught: %v", err)
	}
	// A metric nobody measured is an error, not a pass.
	if err := rep.CheckThresholds([]plan.Threshold{req("p99_mss: < 1.1 x baseline")}); err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "no configuration measured p99_mss") {
		t.Errorf("unknown metric: %v", err)
	}
}

// The HTML shows each repetition beside its median (throughput and p99:
// 16 successful runs, 2 plots) and each configuration's window second by
// second, on shared scales.
func TestHTMLStripAndWindow(t *testing.T) {
	rep := loadFixture(t)
	var buf bytes.Buffer
	if err := Render(&buf, rep, "html"); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, "repetition value"); n != 32 {
		t.Errorf("%d repetition points, want 32", n)
	}
	if n := strings.Count(page, "<title>Requests completed per second</title>"); n != 4 {
		t.Errorf("%d window plots, want one per configuration with results (4)", n)
	}
	for _, w := range []string{"Over the measured window", "Per operation, versus the baseline", "only 2 runs: intervals are approximate below 5"} {
		if !strings.Contains(page, w) {
			t.Errorf("html lacks %q", w)
		}
	}
}

// TestKubeEnvironment: a cluster's runs show the cluster (version,
// kube-proxy mode, nodes with their CPU manager policy) and, per
// configuration, where its pods and its load generator ran (issue 37
// item 5: recorded in every record, shown nowhere).
func TestKubeEnvironment(t *testing.T) {
	recs := genRecords(t)
	kube := &results.KubeInfo{Context: "ctrperf-kube", Server: "https://198.19.210.1:6443", ProxyMode: "iptables", ProxyModeFrom: "node kube-node-1",
		Nodes: []results.KubeNode{
			{Name: "kube-node-1", Ready: true, Kubelet: "v1.37.2", Runtime: "containerd://1.6.20", CPUManager: "none"},
			{Name: "kube-node-2", Ready: true, Kubelet: "v1.37.2", Runtime: "containerd://1.6.20", CPUManager: "static"},
		}}
	for i := range recs {
		if recs[i].Config == "host" {
			continue
		}
		k := *kube
		k.Pods = []results.KubePod{{Service: "kv", Node: "kube-node-2", QoS: "Guaranteed", CPUSet: "1"}}
		recs[i].Engine = &results.EngineInfo{Runtime: "kubernetes", Name: "ctrperf-kube", Version: "v1.37.2", Kube: &k}
		recs[i].Knobs = map[string]any{"kubernetes": map[string]any{"client": "pod", "clients": float64(2), "client_node": "kube-node-1"}}
	}
	b, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(envLines(b.Env), "\n")
	for _, w := range []string{
		"Kubernetes cluster ctrperf-kube (https://198.19.210.1:6443): version v1.37.2; kube-proxy iptables, read from node kube-node-1 — used by ",
		"  node kube-node-1: kubelet v1.37.2, containerd://1.6.20, CPU manager none",
		"  node kube-node-2: kubelet v1.37.2, containerd://1.6.20, CPU manager static",
		": pods kv on kube-node-2 (Guaranteed, CPUs 1); load from 2 pods on kube-node-1",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("environment lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "Docker engine") {
		t.Errorf("a cluster shown as a Docker engine:\n%s", got)
	}
	var buf bytes.Buffer
	if err := Render(&buf, b, "html"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "CPU manager static") {
		t.Error("the HTML report does not show the cluster")
	}
	if got := kubeClient(map[string]any{"kubernetes": map[string]any{"client": "host"}}); got != "this machine" {
		t.Errorf("client host: %q", got)
	}
}
