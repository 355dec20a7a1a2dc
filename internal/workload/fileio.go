package workload

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

func init() { Register(FileIO{}) }

// FileIO runs one fio job inside the target, in the service's data
// directory, so that what is measured is the filesystem the configuration
// puts there: the container's writable layer (through the storage driver), a
// volume, a bind mount, a tmpfs, or the host's own directory.
type FileIO struct{}

var _ Workload = FileIO{}

// Name implements Workload.
func (FileIO) Name() string { return "fileio" }

// The fio jobs. seqwrite is seed 001's dd reference (1 MB blocks, flushed at
// the end); fsync is a database commit (a small write then fsync, again and
// again); smallfiles is Bonnie++'s small-file phase (create, stat, delete).
var fileioJobs = []string{"seqwrite", "randread4k", "randwrite4k", "fsync", "smallfiles"}

// FileIOLoad are the fileio knobs (under load:, since they say how much I/O
// to offer).
type FileIOLoad struct {
	Job    string // one of fileioJobs
	Size   int64  // bytes of the job's file
	Files  int64  // smallfiles: number of files
	Direct string // "auto" (O_DIRECT where the filesystem takes it), "true", "false"
	Depth  int64  // iodepth with libaio when direct; psync otherwise
}

// DefaultFileIOLoad: a 256 MiB file (fits in memory, like the seeds' runs,
// which is the point of seed 001's "made no difference").
var DefaultFileIOLoad = FileIOLoad{Job: "fsync", Size: 256 << 20, Files: 2000, Direct: "auto", Depth: 1}

// ParseFileIOLoad reads and checks the knobs.
func ParseFileIOLoad(m map[string]any) (FileIOLoad, error) {
	l := DefaultFileIOLoad
	k := newKnobs("load", m)
	k.enum("job", &l.Job, fileioJobs...)
	k.size("size", &l.Size, 1<<20, 64<<30)
	whole(k, "files", &l.Files, 1, 1000000)
	if v, ok := k.get("direct"); ok {
		switch x := v.(type) {
		case bool:
			l.Direct = strconv.FormatBool(x)
		case string:
			if x != "auto" && x != "true" && x != "false" {
				k.fail("direct", v, "want auto, true or false")
			} else {
				l.Direct = x
			}
		default:
			k.fail("direct", v, "want auto, true or false")
		}
	}
	whole(k, "depth", &l.Depth, 1, 256)
	return l, k.err()
}

// Decode implements Workload.
func (FileIO) Decode(k Knobs) (any, any, error) {
	return decodeTool("fileio", k, ParseFileIOLoad, "the fio job is chosen under load")
}

// Services implements Workload: a sleeper in the base image (host: a sleep
// in its own cgroup) that fio is run inside.
func (FileIO) Services(c Config) ([]engine.Service, error) {
	return toolServices("fileio", "io", c, "fio")
}

// fioArgs are fio's arguments (after fio --output-format=json+) for a job,
// run in the data directory. Time-based jobs ramp for the warm-up (fio
// leaves it out of its statistics) and then measure for the window;
// smallfiles is a fixed amount of work (files × create, stat, delete).
func fioArgs(l FileIOLoad, w Window, direct bool) []string {
	a := []string{"--directory=.", "--group_reporting", "--percentile_list=50:90:99:99.9"}
	if l.Job == "smallfiles" {
		// One name pattern for all three jobs so stat and delete act on the
		// files create made; stonewall runs them one after the other.
		return append(a, "--filesize=4k", "--nrfiles="+strconv.FormatInt(l.Files, 10), "--openfiles=1",
			"--fallocate=none", "--filename_format=ctrperf-smallfile.$filenum",
			"--name=create", "--ioengine=filecreate",
			"--name=stat", "--ioengine=filestat", "--stonewall",
			"--name=delete", "--ioengine=filedelete", "--stonewall")
	}
	engineArgs := []string{"--ioengine=psync"}
	if direct {
		engineArgs = []string{"--direct=1", "--ioengine=libaio", "--iodepth=" + strconv.FormatInt(l.Depth, 10)}
	}
	a = append(a, "--name="+l.Job, "--filename=ctrperf-fileio."+l.Job, "--size="+fmtSize(l.Size),
		"--time_based", "--runtime="+fioSeconds(w.Duration), "--ramp_time="+fioSeconds(w.Warmup))
	a = append(a, engineArgs...)
	switch l.Job {
	case "seqwrite":
		a = append(a, "--rw=write", "--bs=1M", "--end_fsync=1")
	case "randread4k":
		a = append(a, "--rw=randread", "--bs=4k")
	case "randwrite4k":
		a = append(a, "--rw=randwrite", "--bs=4k")
	case "fsync":
		// Every write is followed by fsync: the commit of a database with
		// innodb_flush_log_at_trx_commit=1.
		a = append(a, "--rw=write", "--bs=4k", "--fsync=1")
	}
	return a
}

// fioSeconds writes a duration for fio, in whole milliseconds.
func fioSeconds(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// wantDirect decides O_DIRECT: never on tmpfs (it has no O_DIRECT), else as
// asked; "auto" tries it and falls back when the filesystem refuses.
func wantDirect(l FileIOLoad, data engine.DataPlacement) (direct, fallback bool, note string) {
	switch {
	case l.Job == "smallfiles":
		return false, false, ""
	case l.Direct == "false":
		return false, false, "buffered I/O (load.direct: false): the page cache absorbs writes until fsync"
	case data == engine.DataTmpfs || data == plan.DataEmptyDirMemory:
		return false, false, "tmpfs has no O_DIRECT: buffered I/O"
	case l.Direct == "true":
		return true, false, ""
	}
	return true, true, ""
}

// directRefused says whether fio failed because the filesystem does not take
// O_DIRECT (open returns EINVAL, errno 22).
func directRefused(out string) bool {
	return strings.Contains(out, "Invalid argument") || strings.Contains(out, "O_DIRECT") || strings.Contains(out, "error 22")
}

// fioProblem is the text of a failed fio run: the error and RunFio's notes
// (exit status with stderr's tail, job errors).
func fioProblem(err error, m *results.Measurement) string {
	var b strings.Builder
	if err != nil {
		b.WriteString(err.Error())
	}
	if m != nil {
		b.WriteString(strings.Join(m.Notes, "; "))
	}
	return b.String()
}

// Drive implements Workload.
func (FileIO) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(FileIOLoad)
	ex := inData(load.EngineExec(env.Engine, env.Target, "io"))
	direct, fallback, note := wantDirect(l, env.Config.Data)
	w := env.Window
	if l.Job == "smallfiles" {
		w.Warmup = 0
	}
	stop := startedAfter(w.Warmup, env.Started)
	defer func() { stop() }()
	m, err := load.RunFio(ctx, ex, fioArgs(l, w, direct)...)
	if fallback && (err != nil || fioFailed(m)) && directRefused(fioProblem(err, m)) {
		stop()
		stop = startedAfter(w.Warmup, env.Started)
		m, err = load.RunFio(ctx, ex, fioArgs(l, w, false)...)
		note = "the filesystem refused O_DIRECT: buffered I/O"
	}
	if err != nil {
		return nil, fmt.Errorf("fileio %s: %w", l.Job, err)
	}
	if fioFailed(m) {
		return nil, fmt.Errorf("fileio %s: fio failed: %s", l.Job, strings.Join(m.Notes, "; "))
	}
	if note != "" {
		m.Notes = append(m.Notes, note)
	}
	m.Metrics["direct"] = 0
	if direct && !strings.Contains(note, "refused") {
		m.Metrics["direct"] = 1
	}
	if l.Job == "smallfiles" {
		// A file's whole life (create + stat + delete), from fio's mean
		// latencies: the three rates summed would be dominated by stat.
		var ms float64
		for _, name := range []string{"create/read", "stat/read", "delete/read"} {
			if op := m.Operations[name]; op != nil {
				ms += op.MeanMs
			}
		}
		if ms > 0 {
			m.Metrics[results.MetricThroughput] = 1000 / ms
			m.Metrics["file_cycles_per_s"] = 1000 / ms
		}
	}
	if m.Metrics[results.MetricThroughput] <= 0 {
		return m, fmt.Errorf("fileio %s: fio reported no I/O", l.Job)
	}
	return m, nil
}

// fioFailed says whether a parsed report carries a job error or a non-zero
// exit (RunFio keeps those as notes).
func fioFailed(m *results.Measurement) bool {
	if m == nil {
		return false
	}
	for _, n := range m.Notes {
		if strings.HasPrefix(n, "fio exited with status") || strings.HasPrefix(n, "fio job ") {
			return true
		}
	}
	return false
}
