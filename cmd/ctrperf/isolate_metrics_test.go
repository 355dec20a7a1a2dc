package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsListenAddr(t *testing.T) {
	tests := []struct {
		in, addr string
		warns    bool
		bad      bool
	}{
		{in: "", addr: ""},
		{in: ":9464", addr: "127.0.0.1:9464"},
		{in: "9464", addr: "127.0.0.1:9464"},
		{in: "127.0.0.1:9477", addr: "127.0.0.1:9477"},
		{in: "[::1]:9477", addr: "[::1]:9477"},
		{in: "localhost:9477", addr: "localhost:9477"},
		{in: "0.0.0.0:9464", addr: "0.0.0.0:9464", warns: true},
		{in: "[::]:9464", addr: "[::]:9464", warns: true},
		{in: "10.1.2.3:9464", addr: "10.1.2.3:9464", warns: true},
		{in: "metrics.example:9464", addr: "metrics.example:9464", warns: true},
		{in: "127.0.0.1", bad: true},
		{in: ":http", bad: true},
		{in: ":70000", bad: true},
		{in: "1:2:3", bad: true},
	}
	for _, tt := range tests {
		addr, warning, err := metricsListenAddr(tt.in)
		switch {
		case tt.bad && err == nil:
			t.Errorf("%q accepted as %q", tt.in, addr)
		case !tt.bad && (err != nil || addr != tt.addr || (warning != "") != tt.warns):
			t.Errorf("%q: addr %q, warning %q, err %v; want %q, warning %v", tt.in, addr, warning, err, tt.addr, tt.warns)
		}
	}
}

// descNames records the metric names of every collector registered.
type descNames struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *descNames) record(c prometheus.Collector) {
	ch := make(chan *prometheus.Desc, 256)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
}

func (d *descNames) Register(c prometheus.Collector) error {
	d.record(c)
	return d.Registerer.Register(c)
}

func (d *descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.record(c)
	}
	d.Registerer.MustRegister(cs...)
}

// TestGrafanaDashboard checks that the shipped dashboard is valid JSON,
// queries only metrics `isolate run --metrics` serves, and shows what an
// operator needs: state per container, reaction time, CPU pressure and the
// controller's own CPU.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../contrib/grafana/ctrperf-isolate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos *struct {
				W, H int
			} `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	reg := &descNames{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	registerIsolateMetrics(reg)
	if !reg.names["ctrperf_isolate_container_hot"] || !reg.names["process_cpu_seconds_total"] || !reg.names["ctrperf_build_info"] || !reg.names["go_build_info"] {
		t.Fatalf("the registry lacks metrics it should serve: %v", reg.names)
	}
	exists := func(name string) bool {
		if reg.names[name] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} { // histogram series
			if base, ok := strings.CutSuffix(name, suffix); ok && reg.names[base] {
				return true
			}
		}
		return false
	}
	metric := regexp.MustCompile(`\b(?:ctrperf|process|go)_[a-zA-Z0-9_]+`)
	var exprs []string
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		switch q := v.Query.(type) {
		case string:
			exprs = append(exprs, q)
		case map[string]any:
			s, _ := q["query"].(string)
			exprs = append(exprs, s)
		}
	}
	if !vars["node"] {
		t.Errorf("no node variable: a cluster's controllers (the DaemonSet) are told apart by their node label")
	}
	ids := map[int]bool{}
	panelsQuerying := map[string][]string{}
	for _, p := range dash.Panels {
		if ids[p.ID] || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: duplicate id %d or no size", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				panelsQuerying[m] = append(panelsQuerying[m], p.Title)
			}
		}
	}
	for _, e := range exprs {
		for _, m := range metric.FindAllString(e, -1) {
			if !exists(m) {
				t.Errorf("the dashboard queries %s, which isolate run does not serve (in %s)", m, e)
			}
		}
	}
	for _, want := range []string{
		"ctrperf_isolate_container_hot", "ctrperf_isolate_container_demoted", "ctrperf_isolate_decisions_total",
		"ctrperf_isolate_reaction_seconds_bucket", "ctrperf_isolate_container_stall_ratio",
		"ctrperf_isolate_step_cpu_seconds_total", "process_cpu_seconds_total",
	} {
		if len(panelsQuerying[want]) == 0 {
			t.Errorf("no panel shows %s", want)
		}
	}
	if dash.UID == "" || !slices.ContainsFunc(dash.Templating.List, func(v struct {
		Name  string `json:"name"`
		Query any    `json:"query"`
	}) bool {
		return v.Name == "datasource"
	}) {
		t.Error("no uid or no datasource variable: the dashboard cannot be imported into another Grafana")
	}
}
