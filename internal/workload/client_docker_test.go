package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
)

// redisApp is Debian's redis-server as the app, in the base image and on
// the host.
func redisApp() map[string]any {
	argv := []any{"redis-server", "--bind", "{{listen:app}}", "--port", "{{port:app:6379}}", "--save", "", "--appendonly", "no", "--protected-mode", "no"}
	return map[string]any{"image": image.DebianBase.Name, "port": 6379, "command": argv, "host_command": argv}
}

// redisBench is redis-benchmark against it, small enough for a test.
func redisBench(extra map[string]any) map[string]any {
	m := map[string]any{
		"command": []any{"redis-benchmark", "-h", "{{host:app}}", "-p", "{{port:app:6379}}", "-n", "2000", "-c", "10", "-P", "1", "-t", "set,get", "--csv"},
		"parser":  "redis-benchmark", "timeout": "60s"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestClientRedisBenchmarkDocker drives Debian's redis-server with the
// real redis-benchmark from where the load stands on every path: this
// machine against the bare-metal server, docker-proxy's loopback port,
// the container's address, the host side of ctrperf's client namespace
// (published-external) and a client container on the run's network; the
// five at once, each against its own server.
func TestClientRedisBenchmarkDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name)
	var subs []subtest
	for _, tc := range []struct {
		desc       string
		eng        engine.Engine
		runtime    engine.Runtime
		network    engine.NetworkMode
		client     string
		where, hit string // in Tools: where it ran, the address it dialled ("": the app's container IP)
	}{
		{"bare metal", engine.NewBareMetal(), engine.RuntimeHost, engine.NetworkHost, clientHost, "on this machine", "127.0.0.1"},
		{"published through docker-proxy", eng, engine.RuntimeDocker, engine.NetworkPublished, clientHost, "on this machine", "127.0.0.1"},
		{"container IP", eng, engine.RuntimeDocker, engine.NetworkContainerIP, clientHost, "on this machine", ""},
		{"published-external from the client namespace", eng, engine.RuntimeDocker, engine.NetworkPublishedExternal, clientHost, "in the client namespace ctrperf-", "198.18."},
		{"client container at the container IP", eng, engine.RuntimeDocker, engine.NetworkContainerIP, clientContainer, "in the client container", ""},
	} {
		subs = append(subs, subtest{tc.desc, func(t *testing.T) {
			c := Config{Runtime: tc.runtime, Network: tc.network, Data: engine.DataLayer, App: redisApp(),
				Load: redisBench(map[string]any{"client": tc.client})}
			runID := fmt.Sprintf("clienttest-%s-%d", slug(tc.desc), os.Getpid())
			target := deployWith(ctx, t, tc.eng, App{}, c, runID)
			if tc.hit == "" { // the app's container IP
				for _, ct := range target.Containers {
					if ct.Service == "app" {
						tc.hit = ct.IP
					}
				}
			}
			m := driveWith(ctx, t, tc.eng, App{}, target, c)
			if m.Metrics["set_per_s"] <= 0 || m.Metrics["get_per_s"] <= 0 || m.Metrics["set_p99_ms"] <= 0 || m.Metrics["throughput_per_s"] <= 0 {
				t.Errorf("metrics %v", m.Metrics)
			}
			if !strings.Contains(m.Tools["client_where"], tc.where) || !strings.Contains(m.Tools["client"], "-h "+tc.hit) {
				t.Errorf("client %q ran %q, want %q against %s…", m.Tools["client"], m.Tools["client_where"], tc.where, tc.hit)
			}
			if len(m.Executions) != 1 || m.Executions[0].WallS <= 0 {
				t.Errorf("executions %+v", m.Executions)
			}
		}})
	}
	concurrently(t, subs...)
}

// TestClientBadInputDocker: what a client command cannot do is said where
// it happens: a program the client container lacks is not run (with its
// package), a tool that exits non-zero fails with its stderr, a template of
// another service is refused when the plan is read. The three at once.
func TestClientBadInputDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name)
	pid := os.Getpid()

	concurrently(t, subtest{"program missing in the client container", func(t *testing.T) {
		// The Debian base lacks memtier_benchmark, as Debian does.
		c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, Data: engine.DataLayer, App: redisApp(),
			Load: map[string]any{"command": "memtier_benchmark -s {{host:app}} -p {{port:app:6379}} --json-out-file=memtier.json", "parser": "memtier", "client": "container"}}
		target := deployWith(ctx, t, eng, App{}, c, fmt.Sprintf("clienttest-missing-%d", pid))
		c = decoded(t, App{}, c)
		_, err := App{}.Drive(ctx, Env{Engine: eng, Target: target, Config: c, Window: Window{Warmup: time.Second, Duration: time.Second}})
		var tm *ToolMissingError
		if !errors.As(err, &tm) || !tm.NotRunnable() || !strings.Contains(err.Error(), "RedisLabs/memtier_benchmark") {
			t.Fatalf("err = %v, want a not-runnable missing memtier_benchmark with how to get it", err)
		}
	}}, subtest{"non-zero exit", func(t *testing.T) {
		c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataLayer, App: redisApp(),
			Load: redisBench(map[string]any{"command": "redis-benchmark -h {{host:app}} -p {{port:app:6379}} -n 100 -t set --csv --no-such-option"})}
		target := deployWith(ctx, t, eng, App{}, c, fmt.Sprintf("clienttest-exit-%d", pid))
		c = decoded(t, App{}, c)
		_, err := App{}.Drive(ctx, Env{Engine: eng, Target: target, Config: c, Window: Window{Warmup: time.Second, Duration: time.Second}})
		if err == nil || !strings.Contains(err.Error(), "exited with status 1") || !strings.Contains(err.Error(), "no-such-option") {
			t.Fatalf("err = %v, want the exit status and redis-benchmark's complaint", err)
		}
	}}, subtest{"template of an unknown service", func(t *testing.T) {
		c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataLayer, App: redisApp(),
			Load: redisBench(map[string]any{"command": "redis-benchmark -h {{host:cache}} --csv"})}
		if err := validate(App{}, c); err == nil || !strings.Contains(err.Error(), `names service "cache"`) {
			t.Fatalf("err = %v", err)
		}
	}})
}

// pgbenchApp is Debian's PostgreSQL 15 as the app, run as postgres with
// its cluster made in the data directory and open to the run's network.
func pgbenchApp() map[string]any {
	start := `d={{data:app}}/pgdata; /usr/lib/postgresql/15/bin/initdb -D "$d" -A trust -U postgres >/dev/null && ` +
		`echo "host all all 0.0.0.0/0 trust" >> "$d/pg_hba.conf" && ` +
		`exec /usr/lib/postgresql/15/bin/postgres -D "$d" -p {{port:app:5432}} -c listen_addresses={{listen:app}} -k /tmp`
	return map[string]any{"image": image.DebianBase.Name, "port": 5432, "user": "postgres", "data_dir": "/var/lib/postgresql",
		"command": []any{"/bin/sh", "-c", start}}
}

// TestClientPgbenchDocker drives PostgreSQL with the real pgbench from
// this machine (published, container IP, published-external), its tables
// made by the warm-up command; the three at once, each its own server.
func TestClientPgbenchDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name)
	conn := "-h {{host:app}} -p {{port:app:5432}} -U postgres"
	var subs []subtest
	for _, network := range []engine.NetworkMode{engine.NetworkPublished, engine.NetworkContainerIP, engine.NetworkPublishedExternal} {
		subs = append(subs, subtest{string(network), func(t *testing.T) {
			c := Config{Runtime: engine.RuntimeDocker, Network: network, Data: engine.DataVolume, App: pgbenchApp(),
				Load: map[string]any{"command": "pgbench " + conn + " -S -T 2 -c 2 --progress=1 postgres",
					"warmup_command": "pgbench " + conn + " -i -s 1 postgres", "parser": "pgbench", "timeout": "60s"}}
			m := deployAndDrive(ctx, t, eng, App{}, c, fmt.Sprintf("clienttest-pg-%s-%d", network, os.Getpid()))
			if m.Metrics["tps"] <= 0 || m.Metrics["latency_avg_ms"] <= 0 || m.Metrics["progress_tps_min"] <= 0 || m.Declared["tps"].Better != "higher" {
				t.Errorf("metrics %v declared %v", m.Metrics, m.Declared)
			}
			if op := m.Operations["transaction"]; op == nil || op.Count <= 0 {
				t.Errorf("operations %v", m.Operations)
			}
		}})
	}
	concurrently(t, subs...)
}
