package workload

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func init() { Register(OLTP{}) }

// OLTP is sysbench's OLTP benchmark against MariaDB in one target (seed
// 004's tpcc-mysql contest, where InnoDB's buffer pool size and instances and
// innodb_lru_scan_depth were tuned). mariadbd and sysbench run side by side
// (the "combined" topology: sysbench is exec'd into the database's
// container, or runs beside the host's mariadbd in its cgroup) and talk over
// the server's Unix socket, so the network is not under test; the data
// directory is, through the configuration's data placement.
type OLTP struct{}

var _ Workload = OLTP{}

// Name implements Workload.
func (OLTP) Name() string { return "oltp" }

// OLTPApp are the MariaDB settings, passed on mariadbd's command line.
// Empty strings and zeros leave MariaDB's defaults.
type OLTPApp struct {
	BufferPoolSize int64 // innodb_buffer_pool_size, bytes
	// innodb_buffer_pool_instances: MariaDB 10.5 went to a single buffer
	// pool and 10.6 removed the variable, so it is refused on the base
	// image's MariaDB 10.11 (at plan time) and on a host whose mariadbd is
	// 10.6 or later (when the run deploys); kept for servers that have it.
	BufferPoolInstances int64
	LRUScanDepth        int64  // innodb_lru_scan_depth
	FlushLogAtTrxCommit int64  // innodb_flush_log_at_trx_commit: 0, 1, 2; -1 = default
	QueryCacheType      string // query_cache_type: OFF, ON, DEMAND; "" = default (OFF)
	QueryCacheSize      int64  // query_cache_size, bytes; -1 = default (1M)
	IOCapacity          int64  // innodb_io_capacity (I/O operations per second of background flushing)
	ReadIOThreads       int64  // innodb_read_io_threads
	WriteIOThreads      int64  // innodb_write_io_threads
}

// OLTPLoad are sysbench's knobs.
type OLTPLoad struct {
	Test      string // oltp_read_write or oltp_read_only
	Threads   int64
	Tables    int64
	TableSize int64
}

// Defaults: MariaDB's 128 MiB pool; 4 tables of 50000 rows (about 50 MiB of
// InnoDB data, so pools below that must read from the data directory).
var (
	DefaultOLTPApp  = OLTPApp{BufferPoolSize: 128 << 20, FlushLogAtTrxCommit: -1, QueryCacheSize: -1}
	DefaultOLTPLoad = OLTPLoad{Test: "oltp_read_write", Threads: 4, Tables: 4, TableSize: 50000}
)

// ParseOLTPApp reads and checks the app knobs.
func ParseOLTPApp(m map[string]any) (OLTPApp, error) {
	a := DefaultOLTPApp
	k := newKnobs("app", m)
	k.size("innodb_buffer_pool_size", &a.BufferPoolSize, 5<<20, 16<<30)
	whole(k, "innodb_buffer_pool_instances", &a.BufferPoolInstances, 1, 64)
	whole(k, "innodb_lru_scan_depth", &a.LRUScanDepth, 100, 1<<20)
	whole(k, "innodb_flush_log_at_trx_commit", &a.FlushLogAtTrxCommit, 0, 2)
	k.enum("query_cache_type", &a.QueryCacheType, "OFF", "ON", "DEMAND")
	k.size("query_cache_size", &a.QueryCacheSize, 0, 16<<30)
	whole(k, "innodb_io_capacity", &a.IOCapacity, 100, 10000000)
	whole(k, "innodb_read_io_threads", &a.ReadIOThreads, 1, 64)
	whole(k, "innodb_write_io_threads", &a.WriteIOThreads, 1, 64)
	return a, k.err()
}

// imageMariaDB is the MariaDB of the Debian base image (bookworm).
const imageMariaDB = "10.11"

// mariadbNoPoolInstances says whether a MariaDB version ("10.11.6") no
// longer has innodb_buffer_pool_instances (removed in 10.6.0).
func mariadbNoPoolInstances(version string) bool {
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 10 || (ma == 10 && mi >= 6)
}

// poolInstancesRefused is the error for innodb_buffer_pool_instances on a
// MariaDB that no longer has it.
func poolInstancesRefused(n int64, where, version string) error {
	return knobError("app.innodb_buffer_pool_instances",
		"app.innodb_buffer_pool_instances = %d: %s has MariaDB %s, which has no such variable (MariaDB 10.5 went to a single buffer pool, 10.6 removed the setting); drop the knob, or use a server that has it", n, where, version)
}

// mariadbVersionRE finds the version in mariadbd --version
// ("mariadbd  Ver 10.11.6-MariaDB-0+deb12u1 for debian-linux-gnu ...").
var mariadbVersionRE = regexp.MustCompile(`Ver\s+(\d+\.\d+(?:\.\d+)?)`)

// hostMariaDBVersion is the host's mariadbd version, replaceable in tests.
var hostMariaDBVersion = func() (string, error) {
	out, err := exec.Command("mariadbd", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("mariadbd --version: %w", err)
	}
	m := mariadbVersionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("mariadbd --version: no version in %q", strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}

// ParseOLTPLoad reads and checks the load knobs.
func ParseOLTPLoad(m map[string]any) (OLTPLoad, error) {
	l := DefaultOLTPLoad
	k := newKnobs("load", m)
	k.enum("test", &l.Test, "oltp_read_write", "oltp_read_only")
	whole(k, "threads", &l.Threads, 1, 1024)
	whole(k, "tables", &l.Tables, 1, 1000)
	whole(k, "table_size", &l.TableSize, 1, 100000000)
	return l, k.err()
}

// Decode implements Workload.
func (OLTP) Decode(k Knobs) (any, any, error) {
	a, aerr := ParseOLTPApp(k.App)
	l, lerr := ParseOLTPLoad(k.Load)
	errs := []error{aerr, lerr, noNetwork("oltp", k.Network)}
	if a.BufferPoolInstances > 0 && k.Runtime.Traits().Images {
		errs = append(errs, poolInstancesRefused(a.BufferPoolInstances, "the base image (Debian bookworm)", imageMariaDB))
	}
	if k.Topology == "split" {
		errs = append(errs, fmt.Errorf("oltp: topology split is not supported: sysbench runs in the database's target over its Unix socket (combined)"))
	}
	return a, l, errors.Join(errs...)
}

// oltpMariadbArgs are the settings on mariadbd's command line.
func oltpMariadbArgs(a OLTPApp) []string {
	args := []string{"--innodb-buffer-pool-size=" + fmtSize(a.BufferPoolSize), "--max-connections=500"}
	if a.BufferPoolInstances > 0 {
		args = append(args, "--innodb-buffer-pool-instances="+strconv.FormatInt(a.BufferPoolInstances, 10))
	}
	if a.LRUScanDepth > 0 {
		args = append(args, "--innodb-lru-scan-depth="+strconv.FormatInt(a.LRUScanDepth, 10))
	}
	if a.FlushLogAtTrxCommit >= 0 {
		args = append(args, "--innodb-flush-log-at-trx-commit="+strconv.FormatInt(a.FlushLogAtTrxCommit, 10))
	}
	if a.QueryCacheType != "" {
		args = append(args, "--query-cache-type="+a.QueryCacheType)
	}
	if a.QueryCacheSize >= 0 {
		args = append(args, "--query-cache-size="+strconv.FormatInt(a.QueryCacheSize, 10))
	}
	for _, o := range []struct {
		flag string
		v    int64
	}{{"--innodb-io-capacity=", a.IOCapacity}, {"--innodb-read-io-threads=", a.ReadIOThreads}, {"--innodb-write-io-threads=", a.WriteIOThreads}} {
		if o.v > 0 {
			args = append(args, o.flag+strconv.FormatInt(o.v, 10))
		}
	}
	return args
}

// oltpScript initialises a data directory under $CTRPERF_DATA and execs
// mariadbd on it, listening on PORT (for the ready check, at the address
// of oltpBind) and on the socket mysqld.sock in the data directory (for
// sysbench).
//
//	sh -c oltpScript oltp-db PORT [mariadbd args...]
const oltpScript = `set -eu
PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
port=$1; shift
D=$` + dataEnv + `
mkdir -p "$D"
if [ ! -d "$D/mysql/mysql" ]; then
  if ! mariadb-install-db --no-defaults --user=root --datadir="$D/mysql" --auth-root-authentication-method=normal --skip-test-db >"$D/install.log" 2>&1; then
    echo "oltp: mariadb-install-db failed:" >&2; cat "$D/install.log" >&2; exit 1
  fi
fi
echo "CREATE DATABASE IF NOT EXISTS sbtest;" >"$D/init.sql"
exec mariadbd --no-defaults --user=root --datadir="$D/mysql" --socket="$D/mysqld.sock" --pid-file="$D/mysqld.pid" \
  --port="$port" --init-file="$D/init.sql" "$@"
`

// oltpBind is where mariadbd listens besides its socket: 127.0.0.1 on the
// host and with Docker's --net=host, where the engine's ready check dials
// it; on a cluster the check dials the pod's address (its node's, with
// hostNetwork) from outside the pod, so every address, with host names
// never resolved: the only accounts are root@localhost, @127.0.0.1, @::1
// and @ the pod's own host name, so nobody logs in from outside the pod.
func oltpBind(rt engine.Runtime) []string {
	if rt.Traits().ClusterNetwork {
		return []string{"--bind-address=0.0.0.0", "--skip-name-resolve"}
	}
	return []string{"--bind-address=127.0.0.1"}
}

// Services implements Workload: MariaDB from the base image, or the host's
// mariadbd with a data directory of the run.
func (OLTP) Services(c Config) ([]engine.Service, error) {
	if err := hostTools("oltp", c, "mariadbd", "mariadb-install-db", "sysbench"); err != nil {
		return nil, err
	}
	a := c.App.(OLTPApp)
	if a.BufferPoolInstances > 0 && c.Runtime.Traits().Processes {
		v, err := hostMariaDBVersion()
		if err != nil {
			return nil, fmt.Errorf("oltp: app.innodb_buffer_pool_instances needs the host's MariaDB version: %w", err)
		}
		if mariadbNoPoolInstances(v) {
			return nil, poolInstancesRefused(a.BufferPoolInstances, "this host", v)
		}
	}
	cmd := append([]string{"/bin/sh", "-c", oltpScript, "oltp-db", "{{port:db:3306}}"}, oltpBind(c.Runtime)...)
	cmd = append(cmd, oltpMariadbArgs(a)...)
	return []engine.Service{{
		Name:      "db",
		Image:     baseImage(),
		Command:   cmd,
		Env:       map[string]string{dataEnv: "{{data:db}}"},
		Ports:     []int{3306},
		DataDir:   "/var/lib/ctrperf-db",
		Resources: c.Resources,
		Ready:     &engine.ReadyCheck{Port: 3306, Timeout: 3 * time.Minute},
	}}, nil
}

// sysbenchOLTP is sysbench's argv for a phase ("prepare" or "run"), run in
// the data directory (the socket path is relative to it).
func sysbenchOLTP(l OLTPLoad, phase string, d time.Duration) []string {
	a := []string{l.Test, "--db-driver=mysql", "--mysql-socket=mysqld.sock", "--mysql-user=root", "--mysql-db=sbtest",
		"--tables=" + strconv.FormatInt(l.Tables, 10), "--table-size=" + strconv.FormatInt(l.TableSize, 10),
		"--threads=" + strconv.FormatInt(l.Threads, 10)}
	if phase == "run" {
		// Deadlocks and lock waits are counted as ignored errors rather than
		// ending the run, as tpcc-mysql's retries did.
		a = append(a, "--time="+strconv.FormatInt(int64((d+time.Second/2)/time.Second), 10), "--percentile=99",
			"--mysql-ignore-errors=1213,1205,1020")
	}
	return append(a, phase)
}

// Drive implements Workload: prepare the tables (outside the window), a
// warm-up run that fills the buffer pool, then the measured run.
func (OLTP) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(OLTPLoad)
	if env.Window.Duration < time.Second {
		return nil, fmt.Errorf("oltp: duration %s is shorter than sysbench's 1 s resolution", env.Window.Duration)
	}
	ex := inData(load.EngineExec(env.Engine, env.Target, "db"))
	prep := append([]string{"sysbench"}, sysbenchOLTP(l, "prepare", 0)...)
	out, errOut, code, err := ex(ctx, prep)
	if err != nil {
		return nil, fmt.Errorf("oltp: sysbench prepare: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("oltp: sysbench prepare exited with status %d: %s %s", code, lastLines(errOut, 5), lastLines(out, 5))
	}
	if env.Window.Warmup >= time.Second {
		if _, err := load.RunSysbench(ctx, ex, sysbenchOLTP(l, "run", env.Window.Warmup)...); err != nil {
			return nil, fmt.Errorf("oltp: warm-up: %w", err)
		}
	}
	if env.Started != nil {
		env.Started()
	}
	m, err := load.RunSysbench(ctx, ex, sysbenchOLTP(l, "run", env.Window.Duration)...)
	if err != nil {
		return nil, fmt.Errorf("oltp: %w", err)
	}
	if m.Metrics[results.MetricTransactions] <= 0 {
		return m, fmt.Errorf("oltp: sysbench reported no transactions (%s)", strings.Join(m.Notes, "; "))
	}
	m.Metrics["tps"] = m.Metrics[results.MetricTransactions]
	m.Metrics["qps"] = m.Metrics[results.MetricQueries]
	return m, nil
}

// lastLines is the end of a tool's output for an error message.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
