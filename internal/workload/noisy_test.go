package workload

import (
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

func TestNoisyKnobs(t *testing.T) {
	docker := func(app, ld map[string]any) Config {
		return Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, App: app, Load: ld}
	}
	kube := func(n engine.NetworkMode, app map[string]any) Config {
		return Config{Runtime: plan.RuntimeKubernetes, Network: n, App: app}
	}
	tests := []struct {
		desc    string
		c       Config
		wantErr string // "" for valid
		check   func(t *testing.T, a NoisyApp, l NoisyLoad)
	}{
		{"defaults: 3 tenants, one hot after a third, closed loop", docker(nil, nil), "", func(t *testing.T, a NoisyApp, l NoisyLoad) {
			if a.Tenants != 3 || l.Hot != 1 || l.HotConcurrency != 2 || l.hotStart(30*time.Second) != 10*time.Second {
				t.Errorf("got %+v %+v", a, l)
			}
		}},
		{"hot_after as a duration", docker(nil, map[string]any{"hot_after": "20s"}), "", func(t *testing.T, _ NoisyApp, l NoisyLoad) {
			if l.hotStart(time.Minute) != 20*time.Second {
				t.Errorf("hot start %s", l.hotStart(time.Minute))
			}
		}},
		{"hot_rate selects open loop", docker(nil, map[string]any{"hot_rate": 200}), "", func(t *testing.T, _ NoisyApp, l NoisyLoad) {
			if l.HotRate != 200 || l.HotConcurrency != 0 {
				t.Errorf("got %+v", l)
			}
		}},
		{"solo: one tenant, none hot", docker(map[string]any{"tenants": 1}, map[string]any{"hot": 0}), "", nil},
		{"hot_after fraction of 1", docker(nil, map[string]any{"hot_after": 1}), "strictly between 0 and 1", nil},
		{"hot_after that is no duration", docker(nil, map[string]any{"hot_after": "soon"}), "want a fraction of the window", nil},
		{"every tenant hot", docker(map[string]any{"tenants": 2}, map[string]any{"hot": 2}), "at least one tenant must stay quiet", nil},
		{"both hot_rate and hot_concurrency", docker(nil, map[string]any{"hot_rate": 100, "hot_concurrency": 4}), "choose open loop", nil},
		{"hot tenants without extra load", docker(nil, map[string]any{"hot_concurrency": 0}), "never turn hot", nil},
		{"unknown knob names the known ones", docker(nil, map[string]any{"hot_ratio": 1}), "load.hot_ratio: unknown knob", nil},
		{"zero tenants", docker(map[string]any{"tenants": 0}, nil), "app.tenants = 0: out of range", nil},
		{"host runtime refused", Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost}, "needs runtime docker or kubernetes", nil},
		{"kubernetes, pod IPs", kube(plan.NetworkPodIP, map[string]any{"hot_resources": "none"}), "", func(t *testing.T, a NoisyApp, _ NoisyLoad) {
			if a.HotResources != NoisyHotNone {
				t.Errorf("got %+v", a)
			}
		}},
		{"kubernetes Service refused: kube-proxy is a hidden tenant", kube(plan.NetworkService, nil), "use network: pod-ip", nil},
		{"kubernetes NodePort refused", kube(plan.NetworkNodePort, nil), "kube-proxy's translation", nil},
		{"kubernetes hostNetwork refused: one port per node", kube(plan.NetworkHostNetwork, nil), "the same port of its node", nil},
		{"hot_resources of no hot tenant", docker(map[string]any{"hot_resources": "none"}, map[string]any{"hot": 0}), "no hot tenant", nil},
		{"hot_resources unknown value", docker(map[string]any{"hot_resources": "half"}, nil), "hot_resources", nil},
		{"published port refused: docker-proxy is a hidden tenant", Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished}, "use network: container-ip", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := validate(Noisy{}, tt.c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if tt.check != nil {
				c := decoded(t, Noisy{}, tt.c)
				tt.check(t, c.App.(NoisyApp), c.Load.(NoisyLoad))
			}
		})
	}
}

func TestNoisyServices(t *testing.T) {
	c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, App: map[string]any{"tenants": 4, "hash_cost": 13},
		Load: map[string]any{"hot": 2}}
	svcs, err := Noisy{}.Services(decoded(t, Noisy{}, c))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range svcs {
		names = append(names, s.Name)
		if s.Labels[labels.Isolate] != "true" {
			t.Errorf("%s does not opt in to isolate: %v", s.Name, s.Labels)
		}
		argv := strings.Join(s.Command, " ")
		if !strings.Contains(argv, "{{port:"+s.Name+":8080}}") || !strings.Contains(argv, "--hash-cost 13") {
			t.Errorf("%s argv %q", s.Name, argv)
		}
	}
	if got := strings.Join(names, ","); got != "tenant1,tenant2,hot1,hot2" {
		t.Errorf("services %s", got)
	}
}

// TestNoisyTenantPods: on Kubernetes the tenants are pods with the
// configuration's resources, no isolate label (no controller follows
// pods), and with hot_resources none the hot ones have none (BestEffort).
func TestNoisyTenantPods(t *testing.T) {
	res := engine.Resources{CPUs: 1, MemoryBytes: 256 << 20}
	for _, tc := range []struct {
		hotRes  string
		hotWant engine.Resources
	}{{"", res}, {"same", res}, {"none", engine.Resources{}}} {
		app := map[string]any{"tenants": 2}
		if tc.hotRes != "" {
			app["hot_resources"] = tc.hotRes
		}
		c := decoded(t, Noisy{}, Config{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkPodIP, App: app, Load: map[string]any{"hot": 1}})
		c.Resources = res
		svcs, err := Noisy{}.Services(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(svcs) != 2 || svcs[0].Name != "tenant1" || svcs[1].Name != "hot1" {
			t.Fatalf("services %+v", svcs)
		}
		if svcs[0].Resources != res || svcs[1].Resources != tc.hotWant {
			t.Errorf("hot_resources %q: quiet %+v, hot %+v, want hot %+v", tc.hotRes, svcs[0].Resources, svcs[1].Resources, tc.hotWant)
		}
		for _, s := range svcs {
			// The pods opt in to the controller's DaemonSet (isolate.policy).
			if s.Labels[labels.Isolate] != "true" {
				t.Errorf("%s lacks the isolate label on kubernetes", s.Name)
			}
		}
	}
}

func TestNoisyScenarioLabels(t *testing.T) {
	sc := noisyScenario("hot1")
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sc.Labels(), ","); got != LabelNoisyPage+",hot1" {
		t.Errorf("labels %s", got)
	}
}

func TestMergeTenantsCarriesTheWorstGeneratorLateness(t *testing.T) {
	window := 30 * time.Second
	open := func(p50, p99, mx float64) *results.Measurement {
		return &results.Measurement{DurationS: window.Seconds(), Operations: map[string]*results.Operation{},
			Load: &results.LoadStats{Mode: "open", TargetRate: 10, AchievedRate: 10, LatenessP50Ms: p50, LatenessP99Ms: p99, LatenessMaxMs: mx}}
	}
	closedHot := &results.Measurement{DurationS: 20, Operations: map[string]*results.Operation{}, Load: &results.LoadStats{Mode: "closed"}}
	tests := []struct {
		desc         string
		ms           []*results.Measurement
		wantP99      float64
		wantMax      float64
		wantMetrics  bool
		wantAchieved float64
	}{
		{"worst p99 and worst max, possibly of different tenants",
			[]*results.Measurement{open(0.1, 2, 40), open(0.2, 9, 12), closedHot}, 9, 40, true, 20},
		{"a hot open-loop run of a shorter phase counts too",
			[]*results.Measurement{open(0.1, 1, 3), {DurationS: 20, Load: &results.LoadStats{Mode: "open", LatenessP99Ms: 5, LatenessMaxMs: 50}}}, 5, 50, true, 10},
		{"no lateness recorded: no metrics",
			[]*results.Measurement{closedHot}, 0, 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := mergeTenants(tc.ms, window)
			if err != nil {
				t.Fatal(err)
			}
			if m.Load.LatenessP99Ms != tc.wantP99 || m.Load.LatenessMaxMs != tc.wantMax || m.Load.LatenessP50Ms != 0 {
				t.Errorf("lateness p50 %v p99 %v max %v; want p99 %v max %v and no merged p50",
					m.Load.LatenessP50Ms, m.Load.LatenessP99Ms, m.Load.LatenessMaxMs, tc.wantP99, tc.wantMax)
			}
			p99, hasP99 := m.Metrics["generator_lateness_p99_ms"]
			mx, hasMax := m.Metrics["generator_lateness_max_ms"]
			if hasP99 != tc.wantMetrics || hasMax != tc.wantMetrics || p99 != tc.wantP99 || mx != tc.wantMax {
				t.Errorf("metrics %v; want generator_lateness_p99_ms %v and _max_ms %v (present: %v)", m.Metrics, tc.wantP99, tc.wantMax, tc.wantMetrics)
			}
			if m.Load.AchievedRate != tc.wantAchieved {
				t.Errorf("achieved %v, want %v (whole-window runs only)", m.Load.AchievedRate, tc.wantAchieved)
			}
		})
	}
}

// The settled tail counts only the quiet logins due settleAfter or more into
// the hot phase: a slow login in the reaction window raises quiet_p99_ms but
// not quiet_p99_settled_ms; the hot tenant's logins are in neither, and
// canceled ones nowhere.
func TestPhaseStatsSettledTail(t *testing.T) {
	start := time.Unix(1000, 0)
	p := newPhaseStats(start)
	for i := range 200 {
		due := start.Add(settleAfter + time.Duration(i)*10*time.Millisecond)
		p.observe(false, due, 5*time.Millisecond, "")
	}
	for i := range 5 { // the reaction window: before settleAfter
		p.observe(false, start.Add(time.Duration(i)*100*time.Millisecond), 80*time.Millisecond, "")
	}
	p.observe(false, start.Add(settleAfter-time.Millisecond), 80*time.Millisecond, "")
	p.observe(true, start.Add(2*settleAfter), 500*time.Millisecond, "")
	p.observe(false, start.Add(2*settleAfter), 900*time.Millisecond, canceledKind)
	m := &results.Measurement{Metrics: map[string]float64{}}
	p.metrics(m, []string{"hot1"}, 10*time.Second)
	if got := m.Metrics[results.MetricQuietP99Ms]; got < 70 {
		t.Errorf("quiet_p99_ms %.3f: the reaction window's slow logins are part of the hot phase", got)
	}
	if got := m.Metrics[results.MetricQuietP99SettledMs]; got < 4.9 || got > 5.1 {
		t.Errorf("quiet_p99_settled_ms %.3f, want 5 (only logins due from %s into the hot phase)", got, settleAfter)
	}
	if p.settled.TotalCount() != 200 || p.quiet.TotalCount() != 206 || p.hotOK != 1 {
		t.Errorf("counts: settled %d quiet %d hot ok %d", p.settled.TotalCount(), p.quiet.TotalCount(), p.hotOK)
	}
	// Without a hot tenant (all-quiet, the ratio's baseline) the same span
	// of the window is measured.
	q := &results.Measurement{Metrics: map[string]float64{}}
	p.metrics(q, nil, 10*time.Second)
	if got := q.Metrics[results.MetricQuietP99SettledMs]; got < 4.9 || got > 5.1 {
		t.Errorf("all-quiet's quiet_p99_settled_ms %.3f, want 5", got)
	}
}
