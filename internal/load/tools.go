package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"ctrperf/internal/engine"
	"ctrperf/internal/results"
)

// ExecFunc runs argv inside the target (host process group or container)
// and returns its output. A non-zero exit status is not an error; err is
// for failing to run at all.
type ExecFunc func(ctx context.Context, argv []string) (stdout, stderr []byte, exitCode int, err error)

// EngineExec adapts engine.Engine.Exec on one service of a target.
func EngineExec(e engine.Engine, t *engine.Target, service string) ExecFunc {
	return func(ctx context.Context, argv []string) ([]byte, []byte, int, error) {
		r, err := e.Exec(ctx, t, service, argv)
		if err != nil {
			return nil, nil, -1, err
		}
		return r.Stdout, r.Stderr, r.ExitCode, nil
	}
}

// toolVersion runs argv (e.g. fio --version) and returns its first line.
func toolVersion(ctx context.Context, exec ExecFunc, argv ...string) (string, error) {
	out, errOut, code, err := exec(ctx, argv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	line := firstLine(out)
	if line == "" {
		line = firstLine(errOut)
	}
	if code != 0 || line == "" {
		return "", fmt.Errorf("%s: exit status %d: %s", strings.Join(argv, " "), code, tail(errOut))
	}
	return line, nil
}

// runTool runs a tool and its version query; a failed version query is a
// note, not a failure.
func runTool(ctx context.Context, exec ExecFunc, name string, versionArgv, argv []string) (stdout, stderr []byte, code int, version string, notes []string, err error) {
	version, verr := toolVersion(ctx, exec, versionArgv...)
	if verr != nil {
		notes = append(notes, "version unknown: "+verr.Error())
	}
	stdout, stderr, code, err = exec(ctx, argv)
	if err != nil {
		return nil, nil, code, version, notes, fmt.Errorf("run %s in target: %w", name, err)
	}
	if code != 0 {
		notes = append(notes, fmt.Sprintf("%s exited with status %d: %s", name, code, tail(stderr)))
	}
	return stdout, stderr, code, version, notes, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

// ---- fio ----

// RunFio runs fio with args inside the target with --output-format=json+
// and parses its report. Each job and direction becomes an operation
// "job/read", "job/write", "job/trim", "job/sync" with a histogram built from
// fio's completion-latency bins.
func RunFio(ctx context.Context, exec ExecFunc, args ...string) (*results.Measurement, error) {
	argv := append([]string{"fio", "--output-format=json+"}, args...)
	out, _, code, version, notes, err := runTool(ctx, exec, "fio", []string{"fio", "--version"}, argv)
	if err != nil {
		return nil, err
	}
	m, perr := ParseFio(bytes.NewReader(fioJSON(out)))
	if perr != nil {
		return nil, fmt.Errorf("fio (exit status %d): %w", code, perr)
	}
	if version != "" {
		m.Tools["fio"] = version
	}
	m.Notes = append(m.Notes, notes...)
	return m, nil
}

// fioJSON skips anything fio printed before its JSON document (warnings
// about the job file go to stdout too).
func fioJSON(out []byte) []byte {
	if i := bytes.IndexByte(out, '{'); i > 0 {
		return out[i:]
	}
	return out
}

type fioReport struct {
	Version string   `json:"fio version"`
	Jobs    []fioJob `json:"jobs"`
}

type fioJob struct {
	Name       string  `json:"jobname"`
	Error      int     `json:"error"`
	JobRuntime int64   `json:"job_runtime"` // ms
	Read       fioDir  `json:"read"`
	Write      fioDir  `json:"write"`
	Trim       fioDir  `json:"trim"`
	Sync       fioSync `json:"sync"`
}

type fioDir struct {
	IOBytes  int64   `json:"io_bytes"`
	BWBytes  float64 `json:"bw_bytes"`
	IOPS     float64 `json:"iops"`
	Runtime  int64   `json:"runtime"` // ms
	TotalIOs int64   `json:"total_ios"`
	Clat     fioLat  `json:"clat_ns"`
	Lat      fioLat  `json:"lat_ns"`
}

type fioSync struct {
	TotalIOs int64  `json:"total_ios"`
	Lat      fioLat `json:"lat_ns"`
}

type fioLat struct {
	Min        float64            `json:"min"`
	Max        float64            `json:"max"`
	Mean       float64            `json:"mean"`
	N          int64              `json:"N"`
	Percentile map[string]float64 `json:"percentile"`
	Bins       map[string]int64   `json:"bins"`
}

// ParseFio parses fio's json or json+ output. Throughput_per_s is the total
// IOPS over all jobs and directions.
func ParseFio(r io.Reader) (*results.Measurement, error) {
	var rep fioReport
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("parse fio json: %w", err)
	}
	if len(rep.Jobs) == 0 {
		return nil, errors.New("parse fio json: no jobs in the report")
	}
	m := &results.Measurement{
		Operations: map[string]*results.Operation{},
		Metrics:    map[string]float64{},
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{},
	}
	if rep.Version != "" {
		m.Tools["fio"] = rep.Version
	}
	var iops, readIOPS, writeIOPS, readBW, writeBW float64
	var maxRuntime int64
	for _, j := range rep.Jobs {
		if j.JobRuntime > maxRuntime {
			maxRuntime = j.JobRuntime
		}
		for _, d := range []struct {
			name string
			dir  fioDir
		}{{"read", j.Read}, {"write", j.Write}, {"trim", j.Trim}} {
			if d.dir.TotalIOs == 0 {
				continue
			}
			if d.dir.Runtime > maxRuntime {
				maxRuntime = d.dir.Runtime
			}
			op, err := fioOperation(d.dir.TotalIOs, d.dir.IOBytes, d.dir.Clat)
			if err != nil {
				return nil, fmt.Errorf("fio job %s %s: %w", j.Name, d.name, err)
			}
			if j.Error != 0 {
				op.Errors = map[string]int64{"fio_error_" + strconv.Itoa(j.Error): 1}
			}
			m.Operations[j.Name+"/"+d.name] = op
			iops += d.dir.IOPS
			switch d.name {
			case "read":
				readIOPS += d.dir.IOPS
				readBW += d.dir.BWBytes
			case "write":
				writeIOPS += d.dir.IOPS
				writeBW += d.dir.BWBytes
			}
		}
		if j.Sync.TotalIOs > 0 {
			op, err := fioOperation(j.Sync.TotalIOs, 0, j.Sync.Lat)
			if err != nil {
				return nil, fmt.Errorf("fio job %s sync: %w", j.Name, err)
			}
			m.Operations[j.Name+"/sync"] = op
		}
		if j.Error != 0 {
			m.Notes = append(m.Notes, fmt.Sprintf("fio job %s reported error %d", j.Name, j.Error))
		}
	}
	m.DurationS = float64(maxRuntime) / 1000
	m.Metrics[results.MetricElapsed] = m.DurationS
	m.Metrics["iops"] = iops
	m.Metrics[results.MetricThroughput] = iops
	m.Metrics["read_iops"] = readIOPS
	m.Metrics["write_iops"] = writeIOPS
	m.Metrics["read_bw_bytes_per_s"] = readBW
	m.Metrics["write_bw_bytes_per_s"] = writeBW
	return m, nil
}

// fioOperation turns a direction's latency block into an Operation: a
// histogram from the json+ bins (ns → µs) when present, and fio's own
// percentiles in ms either way.
func fioOperation(count, bytes int64, lat fioLat) (*results.Operation, error) {
	op := &results.Operation{Count: count, Bytes: bytes, MeanMs: lat.Mean / 1e6}
	if len(lat.Percentile) > 0 {
		op.PercentilesMs = map[string]float64{"min": lat.Min / 1e6, "max": lat.Max / 1e6}
		for k, v := range lat.Percentile {
			f, err := strconv.ParseFloat(k, 64)
			if err != nil {
				return nil, fmt.Errorf("percentile key %q: %w", k, err)
			}
			op.PercentilesMs[strconv.FormatFloat(f, 'f', -1, 64)] = v / 1e6
		}
	}
	if len(lat.Bins) > 0 {
		h := results.NewHistogram()
		for k, n := range lat.Bins {
			ns, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("latency bin %q: %w", k, err)
			}
			us := results.HistValue(time.Duration(ns).Round(time.Microsecond))
			if err := h.RecordValues(us, n); err != nil {
				return nil, fmt.Errorf("latency bin %q: %w", k, err)
			}
		}
		enc, err := results.EncodeHistogram(h)
		if err != nil {
			return nil, err
		}
		op.Histogram = enc
	}
	return op, nil
}

// ---- sysbench ----

// RunSysbench runs sysbench with args (e.g. "cpu", "--time=10", "run" or
// "oltp_read_write", "--mysql-socket=...", "run") inside the target and
// parses its report. The operation label is the test name (the first
// argument that does not start with "-").
func RunSysbench(ctx context.Context, exec ExecFunc, args ...string) (*results.Measurement, error) {
	label := "sysbench"
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			label = a
			break
		}
	}
	argv := append([]string{"sysbench"}, args...)
	out, stderr, code, version, notes, err := runTool(ctx, exec, "sysbench", []string{"sysbench", "--version"}, argv)
	if err != nil {
		return nil, err
	}
	m, perr := ParseSysbench(bytes.NewReader(out), label)
	if perr != nil {
		return nil, fmt.Errorf("sysbench %s (exit status %d: %s): %w", label, code, tail(stderr), perr)
	}
	if version != "" {
		m.Tools["sysbench"] = version
	}
	m.Notes = append(m.Notes, notes...)
	return m, nil
}

var (
	sbVersion = regexp.MustCompile(`^sysbench (\S+)`)
	// "transactions:   2281   (759.66 per sec.)"
	sbCountRate = regexp.MustCompile(`^\s*(transactions|queries|ignored errors|reconnects):\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	sbKeyValue  = regexp.MustCompile(`^\s*([A-Za-z0-9 ]+):\s+([\d.]+)s?\s*$`)
)

// ParseSysbench parses the human report of sysbench 1.0 (it has no machine
// format): events/s for cpu, memory, threads; tps, qps and ignored errors for
// oltp_*; the latency block (ms). throughput_per_s is transactions/s when
// the test has transactions, else events/s.
func ParseSysbench(r io.Reader, label string) (*results.Measurement, error) {
	m := &results.Measurement{
		Operations: map[string]*results.Operation{},
		Metrics:    map[string]float64{},
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{},
	}
	op := &results.Operation{PercentilesMs: map[string]float64{}}
	section := ""
	var haveEvents, haveTPS, haveLatency bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if v := sbVersion.FindStringSubmatch(line); v != nil {
			m.Tools["sysbench"] = "sysbench " + v[1]
			continue
		}
		if strings.HasSuffix(trimmed, ":") && !strings.HasPrefix(line, "        ") {
			section = strings.TrimSuffix(trimmed, ":")
		}
		if c := sbCountRate.FindStringSubmatch(line); c != nil {
			n, err := strconv.ParseInt(c[2], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("sysbench %s: count %q: %w", c[1], c[2], err)
			}
			rate, err := strconv.ParseFloat(c[3], 64)
			if err != nil {
				return nil, fmt.Errorf("sysbench %s: rate %q: %w", c[1], c[3], err)
			}
			switch c[1] {
			case "transactions":
				m.Metrics[results.MetricTransactions] = rate
				haveTPS = true
			case "queries":
				m.Metrics[results.MetricQueries] = rate
			case "ignored errors":
				m.Metrics["ignored_errors"] = float64(n)
				if n > 0 {
					op.Errors = map[string]int64{"ignored_sql_errors": n}
				}
			case "reconnects":
				m.Metrics["reconnects"] = float64(n)
			}
			continue
		}
		kv := sbKeyValue.FindStringSubmatch(line)
		if kv == nil {
			continue
		}
		key := strings.TrimSpace(kv[1])
		val, err := strconv.ParseFloat(kv[2], 64)
		if err != nil {
			return nil, fmt.Errorf("sysbench %s: %q: %w", key, kv[2], err)
		}
		switch {
		case key == "events per second":
			m.Metrics["events_per_s"] = val
			haveEvents = true
		case key == "total time":
			m.DurationS = val
			m.Metrics[results.MetricElapsed] = val
		case key == "total number of events":
			op.Count = int64(val)
		case strings.HasPrefix(section, "Latency"):
			haveLatency = true
			switch {
			case key == "min" || key == "max":
				op.PercentilesMs[key] = val
			case key == "avg":
				op.MeanMs = val
			case strings.HasSuffix(key, "th percentile"):
				p := strings.TrimSuffix(key, "th percentile")
				op.PercentilesMs[p] = val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read sysbench output: %w", err)
	}
	if !haveEvents && !haveTPS && op.Count == 0 {
		return nil, errors.New("no sysbench report found (no events per second, transactions or event count)")
	}
	if !haveLatency {
		op.PercentilesMs = nil
	}
	switch {
	case haveTPS:
		m.Metrics[results.MetricThroughput] = m.Metrics[results.MetricTransactions]
	case haveEvents:
		m.Metrics[results.MetricThroughput] = m.Metrics["events_per_s"]
	case m.DurationS > 0:
		m.Metrics[results.MetricThroughput] = float64(op.Count) / m.DurationS
	}
	m.Operations[label] = op
	return m, nil
}

// ---- stress-ng ----

// RunStressNG runs stress-ng with args (e.g. "--exec", "2", "--timeout",
// "10s") inside the target, adding --metrics-brief and --yaml /dev/stdout,
// and parses the bogo-ops metrics. Note: stress-ng skips the exec stressor
// when it runs as root; run it as another user (Service.User).
func RunStressNG(ctx context.Context, exec ExecFunc, args ...string) (*results.Measurement, error) {
	argv := append([]string{"stress-ng"}, args...)
	argv = append(argv, "--metrics-brief", "--yaml", "/dev/stdout")
	out, stderr, code, version, notes, err := runTool(ctx, exec, "stress-ng", []string{"stress-ng", "--version"}, argv)
	if err != nil {
		return nil, err
	}
	m, perr := ParseStressNGYAML(bytes.NewReader(out))
	if perr != nil {
		// Older builds or a /dev/stdout that is not writable: the metrics
		// table in the log says the same.
		var ferr error
		m, ferr = ParseStressNGLog(bytes.NewReader(stderr))
		if ferr != nil {
			return nil, fmt.Errorf("stress-ng (exit status %d): yaml: %v; log: %w; stderr: %s", code, perr, ferr, tail(stderr))
		}
	}
	if version != "" {
		m.Tools["stress-ng"] = version
	}
	m.Notes = append(m.Notes, notes...)
	return m, nil
}

type stressYAML struct {
	SystemInfo struct {
		Version string `yaml:"stress-ng-version"`
	} `yaml:"system-info"`
	Metrics []struct {
		Stressor      string  `yaml:"stressor"`
		BogoOps       int64   `yaml:"bogo-ops"`
		PerSecReal    float64 `yaml:"bogo-ops-per-second-real-time"`
		PerSecUsrSys  float64 `yaml:"bogo-ops-per-second-usr-sys-time"`
		WallClockTime float64 `yaml:"wall-clock-time"`
	} `yaml:"metrics"`
}

// ParseStressNGYAML parses the --yaml report. Each stressor is an
// operation (Count = bogo ops); throughput_per_s is the sum of bogo ops per
// second of real time over all stressors.
func ParseStressNGYAML(r io.Reader) (*results.Measurement, error) {
	var doc stressYAML
	if err := yaml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse stress-ng yaml: %w", err)
	}
	if len(doc.Metrics) == 0 {
		return nil, errors.New("parse stress-ng yaml: no metrics (was every stressor skipped?)")
	}
	var rows []stressRow
	for _, s := range doc.Metrics {
		rows = append(rows, stressRow{s.Stressor, s.BogoOps, s.WallClockTime, s.PerSecReal, s.PerSecUsrSys})
	}
	m := stressMeasurement(rows)
	if doc.SystemInfo.Version != "" {
		m.Tools["stress-ng"] = "stress-ng " + doc.SystemInfo.Version
	}
	return m, nil
}

type stressRow struct {
	name             string
	ops              int64
	real, perS, perU float64
}

// "stress-ng: metrc: [17304] fork   4691   2.00   0.94   0.94   2345.24   2488.88"
var stressMetricLine = regexp.MustCompile(`metrc: \[\d+\]\s+([a-z0-9-]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)

// parseStressRow reads a stressMetricLine's fields: name, bogo ops, real
// time, user and system time, bogo ops/s (real) and per CPU second.
func parseStressRow(f []string) (stressRow, error) {
	row := stressRow{name: f[1]}
	var err error
	if row.ops, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return row, fmt.Errorf("bogo ops %q: %w", f[2], err)
	}
	for _, x := range []struct {
		dst  *float64
		what string
		s    string
	}{{&row.real, "real time", f[3]}, {&row.perS, "bogo ops/s", f[6]}, {&row.perU, "bogo ops/s (usr+sys)", f[7]}} {
		if *x.dst, err = strconv.ParseFloat(x.s, 64); err != nil {
			return row, fmt.Errorf("%s %q: %w", x.what, x.s, err)
		}
	}
	return row, nil
}

// ParseStressNGLog parses the --metrics-brief table of the log.
func ParseStressNGLog(r io.Reader) (*results.Measurement, error) {
	var rows []stressRow
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := stressMetricLine.FindStringSubmatch(sc.Text())
		if f == nil {
			continue
		}
		row, err := parseStressRow(f)
		if err != nil {
			return nil, fmt.Errorf("parse stress-ng log: %q: %w", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read stress-ng log: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("parse stress-ng log: no metrics lines (was every stressor skipped?)")
	}
	return stressMeasurement(rows), nil
}

func stressMeasurement(rows []stressRow) *results.Measurement {
	m := &results.Measurement{
		Operations: map[string]*results.Operation{},
		Metrics:    map[string]float64{},
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{},
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	var total float64
	for _, r := range rows {
		m.Operations[r.name] = &results.Operation{Count: r.ops}
		m.Metrics[r.name+"_bogo_ops_per_s"] = r.perS
		m.Metrics[r.name+"_bogo_ops_per_cpu_s"] = r.perU
		m.DeclareMerge(r.name+"_bogo_ops_per_s", results.MergeSum)
		m.DeclareMerge(r.name+"_bogo_ops_per_cpu_s", results.MergeMean)
		total += r.perS
		if r.real > m.DurationS {
			m.DurationS = r.real
		}
	}
	m.Metrics[results.MetricThroughput] = total
	m.Metrics[results.MetricElapsed] = m.DurationS
	return m
}
