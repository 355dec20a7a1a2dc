package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func TestRunLoad(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("hello"))
	}))
	defer srv.Close()
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()

	base := loadOptions{duration: 300 * time.Millisecond, timeout: 2 * time.Second, maxInFlight: load.DefaultMaxInFlight,
		seed: 1, mix: "set=1", valueSize: 100, keys: 100, format: "table"}
	with := func(f func(*loadOptions)) loadOptions { o := base; f(&o); return o }
	tests := []struct {
		desc     string
		target   string
		o        loadOptions
		wantCode int    // 0: success
		wantOut  string // in stdout
		wantMsg  string // in the error
	}{
		{"closed loop prints the aggregate table", srv.URL + "/", with(func(o *loadOptions) { o.concurrency = 2 }), 0, "GET /", ""},
		{"open loop as JSON with the rate achieved", srv.URL + "/", with(func(o *loadOptions) { o.rate = 50; o.format = "json" }), 0, `"achieved_rate"`, ""},
		{"HTTP errors are counted by kind, not fatal", srv.URL + "/missing", with(func(o *loadOptions) { o.concurrency = 1; o.format = "json" }), 0, `"http_4xx"`, ""},
		{"CSV rows with every percentile", srv.URL + "/", with(func(o *loadOptions) { o.concurrency = 1; o.format = "csv" }), 0,
			"label,samples,errors,error_pct,throughput_per_s,kb_per_s,mean_ms,min_ms,p50_ms,p90_ms,p95_ms,p99_ms,p999_ms,max_ms\nGET /,", ""},
		{"unreachable target is one clear message", closed, with(func(o *loadOptions) { o.concurrency = 1 }), 1, "", "is unreachable"},
		{"a bad URL is refused before anything runs", "ftp://example/", with(func(o *loadOptions) { o.concurrency = 1 }), 2, "", "ftp"},
		{"neither rate nor concurrency", srv.URL + "/", base, 2, "", ""},
		{"a rate below the floor is refused at the flag (it used to run forever)", srv.URL + "/",
			with(func(o *loadOptions) { o.rate = 1e-11 }), 2, "", "rate 1e-11: want between 0.001 and 1e+07"},
		{"a NaN rate is refused", srv.URL + "/", with(func(o *loadOptions) { o.rate = math.NaN() }), 2, "", "want a finite number"},
		{"a rate the in-flight bound cannot keep is a shortfall, not a lower rate", srv.URL + "/",
			with(func(o *loadOptions) { o.rate = 200000; o.maxInFlight = 1 }), 3, "", "rate shortfall"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runLoad(context.Background(), &out, &errOut, tt.target, tt.o, true)
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantCode != 0 && exitcode.Of(err) != tt.wantCode:
				t.Fatalf("err = %v (%T), want exit code %d", err, err, tt.wantCode)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v, want it to say %q", err, tt.wantMsg)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, out.String())
			}
			if tt.o.format == "json" && tt.wantCode == 0 {
				var m results.Measurement
				if err := json.Unmarshal(out.Bytes(), &m); err != nil {
					t.Fatalf("--json output is not a measurement: %v", err)
				}
				if len(m.Operations) == 0 {
					t.Errorf("no operations in %s", out.String())
				}
				var doc struct {
					SchemaVersion  int    `json:"schema_version"`
					CtrperfVersion string `json:"ctrperf_version"`
					Summary        struct {
						Operations map[string]loadStats `json:"operations"`
						Overall    loadStats            `json:"overall"`
					} `json:"summary"`
				}
				if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
					t.Fatal(err)
				}
				label := ""
				for l := range m.Operations {
					label = l
				}
				op, ok := doc.Summary.Operations[label]
				switch {
				case doc.SchemaVersion != jsonSchemaVersion || doc.CtrperfVersion == "":
					t.Errorf("versions missing: %s", out.String())
				case !ok || op.LatencyMs == nil || doc.Summary.Overall.LatencyMs == nil:
					t.Errorf("no latency summary per operation and overall: %s", out.String())
				case op.Samples != m.Operations[label].Count || doc.Summary.Overall.Samples != op.Samples:
					t.Errorf("summary samples %d (overall %d), measured %d", op.Samples, doc.Summary.Overall.Samples, m.Operations[label].Count)
				case !(op.LatencyMs.P50 <= op.LatencyMs.P90 && op.LatencyMs.P90 <= op.LatencyMs.P95 && op.LatencyMs.P95 <= op.LatencyMs.P99 &&
					op.LatencyMs.P99 <= op.LatencyMs.P999 && op.LatencyMs.P999 <= op.LatencyMs.Max && op.LatencyMs.Max > 0):
					t.Errorf("percentiles out of order: %+v", *op.LatencyMs)
				}
			}
		})
	}
}
