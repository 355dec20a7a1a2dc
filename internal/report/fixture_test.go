package report

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ctrperf/internal/results"
)

// fixtureConfig describes one configuration of the generated plan.
type fixtureConfig struct {
	name      string
	knobs     map[string]any
	reps      int
	rate      float64 // sessions per second achieved (median)
	noise     float64 // run-to-run spread of rate and latency (lognormal sigma)
	latencyMs float64 // median request latency
	errRate   float64 // fraction of requests that fail (timeouts)
	failRep   int     // repetition that fails (-1: none)
	notRun    string  // non-empty: every run is not_run with this error
	shortRep  int     // repetition whose achieved rate falls short of the target (-1: none)
	proxyCPU  float64 // docker-proxy CPU %
}

var fixtureConfigs = []fixtureConfig{
	{name: "host", knobs: map[string]any{"runtime": "host"}, reps: 5, rate: 40, noise: 0.02, latencyMs: 4, failRep: -1, shortRep: -1},
	{name: "docker-published", knobs: map[string]any{"runtime": "docker", "network": "published"}, reps: 5, rate: 33, noise: 0.02,
		latencyMs: 6, errRate: 0.004, failRep: -1, shortRep: 3, proxyCPU: 48},
	{name: "docker-host-net", knobs: map[string]any{"runtime": "docker", "network": "host"}, reps: 5, rate: 40, noise: 0.03,
		latencyMs: 4.1, failRep: 2, shortRep: -1},
	{name: "docker-volume-2reps", knobs: map[string]any{"runtime": "docker", "data": "volume"}, reps: 2, rate: 38, noise: 0.15,
		latencyMs: 4.5, failRep: -1, shortRep: -1},
	{name: "docker-btrfs", knobs: map[string]any{"runtime": "docker", "engine": "btrfs"}, reps: 3,
		notRun: "storage driver btrfs unavailable: mkfs.btrfs not found", failRep: -1, shortRep: -1},
}

// fixtureOps are the operations of the web workload per session, with their
// latency relative to the configuration's median and response size.
var fixtureOps = []struct {
	name     string
	latency  float64
	bytesPer int64
}{
	{"login", 1.0, 2100},
	{"create_ticket", 2.5, 5400},
}

// genRecords produces realistic run records in an interleaved run order:
// per-operation latency histograms (lognormal, encoded as the runner
// encodes them), counts, errors, bytes, load stats and system series.
func genRecords(t testing.TB) []results.RunRecord {
	t.Helper()
	return genRecordsFrom(t, fixtureConfigs, 2015)
}

// afterConfigs are the "after" set of the compare fixture: the published
// port without the userland proxy, and one configuration dropped.
func afterConfigs() []fixtureConfig {
	var out []fixtureConfig
	for _, fc := range fixtureConfigs {
		switch fc.name {
		case "docker-published":
			fc.rate, fc.latencyMs, fc.errRate, fc.proxyCPU, fc.shortRep = 39.6, 4.2, 0, 0, -1
		case "docker-volume-2reps":
			continue
		}
		out = append(out, fc)
	}
	return out
}

func genRecordsFrom(t testing.TB, configs []fixtureConfig, seed uint64) []results.RunRecord {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 4))
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const duration = 30.0
	maxReps := 0
	for _, fc := range configs {
		maxReps = max(maxReps, fc.reps)
	}
	var recs []results.RunRecord
	idx := 0
	for rep := 0; rep < maxReps; rep++ {
		for _, fc := range configs {
			if rep >= fc.reps {
				continue
			}
			rec := results.RunRecord{Plan: "smoke", RunID: fmt.Sprintf("run%02d", idx), Index: idx, Config: fc.name,
				Repetition: rep, Knobs: fc.knobs, Workload: "web", Start: start, End: start.Add(35 * time.Second)}
			start = start.Add(40 * time.Second)
			idx++
			switch {
			case fc.notRun != "":
				rec.Status, rec.Error = results.StatusNotRun, fc.notRun
				rec.End = rec.Start
			case rep == fc.failRep:
				rec.Status, rec.Error = results.StatusFailed, "deploy ticketd: container exited with code 137 (out of memory?)"
			default:
				rec.Status = results.StatusOK
				rec.Engine = &results.EngineInfo{Runtime: "host", Name: "host"}
				if fc.knobs["runtime"] == "docker" {
					proxy := true
					rec.Engine = &results.EngineInfo{Runtime: "docker", Name: "default", Version: "20.10.24+dfsg1", StorageDriver: "overlay2",
						DataRoot: "/var/lib/docker", BackingFS: "extfs", UserlandProxy: &proxy}
				}
				rec.Result = genMeasurement(t, r, fc, rep, duration)
				rec.System = genSeries(r, fc)
			}
			recs = append(recs, rec)
		}
	}
	return recs
}

func genMeasurement(t testing.TB, r *rand.Rand, fc fixtureConfig, rep int, duration float64) *results.Measurement {
	runFactor := math.Exp(fc.noise * r.NormFloat64())
	rate := fc.rate * runFactor
	target := 40.0
	achieved := math.Min(rate, target)
	if rep == fc.shortRep {
		achieved = 0.8 * target
	}
	sessions := int64(rate * duration)
	m := &results.Measurement{DurationS: duration, Operations: map[string]*results.Operation{},
		Metrics: map[string]float64{"throughput_per_s": float64(sessions) / duration, "elapsed_s": duration + 0.4*r.Float64()},
		Load:    &results.LoadStats{Mode: "open", TargetRate: target, AchievedRate: achieved, Concurrency: 32},
		Tools:   map[string]string{"loadgen": "ctrperf"}}
	if rep == fc.shortRep {
		m.Load.Late = 12
		m.Notes = append(m.Notes, "12 sessions started late (driver note)")
	}
	for _, op := range fixtureOps {
		h := results.NewHistogram()
		o := &results.Operation{Count: sessions}
		// A slow run is slow for all its requests: latency scales inversely
		// with the run's rate factor.
		med := fc.latencyMs * op.latency * 1000 / runFactor
		for i := int64(0); i < sessions; i++ {
			v := med * math.Exp(0.45*r.NormFloat64())
			if r.Float64() < 0.01 { // a slow tail
				v *= 8
			}
			if err := h.RecordValue(int64(v)); err != nil {
				t.Fatal(err)
			}
		}
		if fc.errRate > 0 {
			n := int64(float64(sessions)*fc.errRate*float64(rep%3) + 0.5)
			if n > 0 {
				o.Errors = map[string]int64{"timeout": n}
			}
		}
		o.Bytes = (sessions - o.ErrorCount()) * op.bytesPer
		enc, err := results.EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		o.Histogram = enc
		m.Operations[op.name] = o
	}
	// The window second by second, from its own stream so that the rest of
	// the fixture does not move when this changes.
	pr := rand.New(rand.NewPCG(uint64(rep), uint64(len(fc.name))))
	for i := 1; i <= int(duration); i++ {
		n := int64(rate*float64(len(fixtureOps))*(0.9+0.2*pr.Float64())) + 1
		med := fc.latencyMs / runFactor * (0.9 + 0.2*pr.Float64())
		m.PerSecond = append(m.PerSecond, results.Second{T: float64(i), Count: n,
			P50Ms: med, P99Ms: med * (3 + 2*pr.Float64()), MaxMs: med * 8})
	}
	return m
}

func genSeries(r *rand.Rand, fc fixtureConfig) *results.Series {
	s := &results.Series{IntervalS: 1}
	load := fc.rate / 40
	for i := 1; i <= 8; i++ {
		cpu := map[string]results.CPUPercent{}
		var all results.CPUPercent
		for c := 0; c < 2; c++ {
			u := 30*load + 8*r.Float64() + float64(c)*10
			sy := 12*load + 4*r.Float64() + fc.proxyCPU/4
			io := 2 * r.Float64()
			si := 3 + 2*r.Float64()
			p := results.CPUPercent{User: u, System: sy, IOWait: io, SoftIRQ: si, Idle: math.Max(0, 100-u-sy-io-si)}
			cpu[fmt.Sprintf("cpu%d", c)] = p
			all.User += p.User / 2
			all.System += p.System / 2
			all.IOWait += p.IOWait / 2
			all.SoftIRQ += p.SoftIRQ / 2
			all.Idle += p.Idle / 2
		}
		cpu["all"] = all
		smp := results.Sample{T: float64(i), CPU: cpu,
			Disks: map[string]results.DiskStats{
				"vda":   {WritesPerS: 40*load + 20*r.Float64(), WriteKBPerS: 400*load + 100*r.Float64(), WriteAwaitMs: 1 + r.Float64(), UtilPercent: 10 + 10*r.Float64()},
				"loop0": {},
			},
			Processes: map[string]results.ProcessStats{"loadgen": {CPUPercent: 15 + 5*r.Float64(), Count: 1}},
		}
		if fc.knobs["runtime"] == "docker" {
			smp.Containers = map[string]results.ContainerStats{"ticketd": {CPUPercent: 60*load + 10*r.Float64()}}
			smp.Processes["dockerd"] = results.ProcessStats{CPUPercent: 1 + r.Float64(), Count: 1}
			if fc.proxyCPU > 0 {
				smp.Processes["docker-proxy"] = results.ProcessStats{CPUPercent: fc.proxyCPU + 5*r.Float64(), Count: 1}
			}
		}
		s.Samples = append(s.Samples, smp)
	}
	return s
}

// writeFixture writes records as OUT/results.jsonl plus a plan.yaml naming
// the baseline, the way bench run leaves an output directory.
func writeFixture(t testing.TB, dir string, recs []results.RunRecord, baseline string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, results.FileName))
	st, err := results.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := st.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := results.Env{Machine: &results.Machine{Time: time.Date(2026, 11, 21, 9, 59, 0, 0, time.UTC), Hostname: "bench1",
		Kernel: "6.1.0-28-amd64", Machine: "x86_64", CPUs: 2, MemTotal: 8 << 30, GoVersion: "go1.24.0", Ctrperf: "v0.9.0",
		CPUModel: "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", Cgroups: "v2"}}
	proxy := true
	env.Engines = []results.EngineInfo{{Runtime: "docker", Name: "default", Version: "20.10.24+dfsg1", StorageDriver: "overlay2",
		DataRoot: "/var/lib/docker", BackingFS: "extfs", UserlandProxy: &proxy}}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, results.EnvFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if baseline != "" {
		plan := fmt.Sprintf("# written by the report fixture generator\nname: fixture\nworkload: web\nbaseline: %s\nconfigurations:\n", baseline)
		seen := map[string]bool{}
		for _, r := range recs {
			if !seen[r.Config] {
				seen[r.Config] = true
				plan += fmt.Sprintf("  - {name: %s, runtime: %v}\n", r.Config, r.Knobs["runtime"])
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "plan.yaml"), []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
