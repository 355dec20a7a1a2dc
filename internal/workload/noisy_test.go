package workload

import (
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/isolate"
)

func TestNoisyKnobs(t *testing.T) {
	docker := func(app, ld map[string]any) Config {
		return Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, App: app, Load: ld}
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
		{"host runtime refused", Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost}, "needs runtime docker", nil},
		{"published port refused: docker-proxy is a hidden tenant", Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished}, "use network: container-ip", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := Noisy{}.Validate(tt.c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if tt.check != nil {
				a, _ := ParseNoisyApp(tt.c.App)
				l, _ := ParseNoisyLoad(tt.c.Load)
				tt.check(t, a, l)
			}
		})
	}
}

func TestNoisyServices(t *testing.T) {
	c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, App: map[string]any{"tenants": 4, "hash_cost": 13},
		Load: map[string]any{"hot": 2}}
	svcs, err := Noisy{}.Services(c)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range svcs {
		names = append(names, s.Name)
		if s.Labels[isolate.LabelIsolate] != "true" {
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

func TestNoisyScenarioLabels(t *testing.T) {
	sc := noisyScenario("hot1")
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sc.Labels(), ","); got != LabelNoisyPage+",hot1" {
		t.Errorf("labels %s", got)
	}
}
