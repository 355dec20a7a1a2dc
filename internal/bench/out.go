package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/engine"
	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/version"
)

// Files in an output directory besides results.jsonl.
const (
	PlanFile = "plan.yaml"         // the plan as run, itself a valid plan
	MetaFile = "meta.json"         // what --resume checks
	EnvFile  = results.EnvFileName // environment facts
	LockFile = ".lock"             // held by the session writing OUT (its pid inside)
)

// openOut makes sure root can write dir without being redirected: dir (made
// 0755 when new; it must exist to be resumed) and every directory above it
// can be changed only by root or the invoking user, and nothing in it is a
// symbolic link or someone else's file (fsutil.CheckDir, CheckEntries).
// Then it locks OUT/.lock for the whole session: a second writer would
// duplicate run indexes, and a resume's tail repair could cut the other
// writer's record. --allow-concurrent does not lift this lock.
func openOut(dir string, resume bool) (*fsutil.DirLock, error) {
	check := fsutil.MakeDir
	if resume {
		check = fsutil.CheckDir
	}
	err := check(dir)
	if err == nil {
		err = fsutil.CheckEntries(dir)
	}
	var unsafe *fsutil.UnsafePathError
	switch {
	case errors.As(err, &unsafe):
		return nil, fmt.Errorf("output directory %s is not safe for root to write: %w; use a directory that only root or you can change", dir, err)
	case resume && errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("resume %s: %w (is it an output directory of `ctrperf bench run`?)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("output directory %s: %w", dir, fsutil.Explain(err))
	}
	lock, err := fsutil.Lock(filepath.Join(dir, LockFile))
	var locked *fsutil.LockedError
	switch {
	case errors.As(err, &locked) && locked.PID > 0:
		return nil, fmt.Errorf("output directory %s is in use by another ctrperf bench run (pid %d holds %s); wait for it to finish or choose another --out", dir, locked.PID, locked.Path)
	case errors.As(err, &locked):
		return nil, fmt.Errorf("output directory %s is in use by another ctrperf bench run (%s is locked); wait for it to finish or choose another --out", dir, locked.Path)
	case errors.As(err, &unsafe):
		return nil, fmt.Errorf("output directory %s is not safe for root to write: %w", dir, err)
	case err != nil:
		return nil, fmt.Errorf("lock output directory %s: %w", dir, fsutil.Explain(err))
	}
	return lock, nil
}

// LoadOutPlan loads OUT/plan.yaml to resume it, after openOut's checks of
// OUT: whoever could write plan.yaml would choose the host commands root
// runs.
func LoadOutPlan(dir string, opt plan.Options) (*plan.Plan, error) {
	if err := fsutil.CheckDir(dir); err != nil {
		var unsafe *fsutil.UnsafePathError
		if errors.As(err, &unsafe) {
			return nil, fmt.Errorf("output directory %s is not safe for root to resume: %w; use a directory that only root or you can change", dir, err)
		}
		return nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	path := filepath.Join(dir, PlanFile)
	b, err := fsutil.ReadTrusted(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return ParsePlan(path, b, opt)
}

// Meta identifies the plan an output directory belongs to.
type Meta struct {
	Plan     string      `json:"plan"`
	PlanHash string      `json:"plan_hash"` // sha256 of the canonical plan.yaml
	Seed     int64       `json:"seed"`
	Runs     int         `json:"runs"`
	Quick    bool        `json:"quick,omitempty"`
	Only     []string    `json:"only,omitempty"`
	Version  string      `json:"ctrperf_version"`
	Started  time.Time   `json:"started"`
	Resumed  []time.Time `json:"resumed,omitempty"`
	Source   string      `json:"source,omitempty"` // the plan file given
}

func (r *runner) meta() Meta {
	return Meta{Plan: r.p.Name, Seed: r.p.Seed, Runs: len(r.p.Configurations) * r.p.Repetitions,
		Quick: r.opt.Quick || r.p.Quicked, Only: r.opt.Only, Version: version.Version, Started: r.opt.Now().UTC(), Source: r.p.File}
}

// prepareOut sets up a new output directory, or checks that a resumed one
// belongs to the same plan and returns the run indexes it already holds,
// with warnings about what it repaired.
func prepareOut(dir string, p *plan.Plan, resume bool, m Meta) (map[int]bool, []string, error) {
	if !resume {
		done, err := newOut(dir, p, m)
		return done, nil, err
	}
	return resumeOut(dir, p, m)
}

func newOut(dir string, p *plan.Plan, m Meta) (map[int]bool, error) {
	canon, err := p.Canonical()
	if err != nil {
		return nil, err
	}
	hash, err := p.Hash()
	if err != nil {
		return nil, err
	}
	m.PlanHash = hash
	for _, f := range []string{MetaFile, results.FileName} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("output directory %s already holds a plan's results (%s); continue it with --resume %s or choose another --out", dir, f, dir)
		}
	}
	// Created here, exclusively: the store then appends to a file that
	// is certainly this session's.
	rf, err := fsutil.OpenTrusted(filepath.Join(dir, results.FileName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fsutil.NewWriteError(filepath.Join(dir, results.FileName), "create", err)
	}
	if err := rf.Close(); err != nil {
		return nil, fsutil.NewWriteError(filepath.Join(dir, results.FileName), "close", err)
	}
	header := fmt.Sprintf("# The plan as run by ctrperf %s (matrix expanded, defaults filled%s).\n# Re-run it with: ctrperf bench run %s\n",
		version.Version, quickNote(m), filepath.Join(dir, PlanFile))
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, PlanFile), append([]byte(header), canon...), 0o644); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, MetaFile), m); err != nil {
		return nil, err
	}
	return map[int]bool{}, nil
}

// resumeOut checks that dir was started with plan p, repairs a partial last
// record and returns the runs already finished.
func resumeOut(dir string, p *plan.Plan, m Meta) (map[int]bool, []string, error) {
	hash, err := p.Hash()
	if err != nil {
		return nil, nil, err
	}
	metaPath := filepath.Join(dir, MetaFile)
	var old Meta
	b, err := fsutil.ReadTrusted(metaPath)
	if err != nil {
		return nil, nil, fmt.Errorf("resume %s: %w (is it an output directory of `ctrperf bench run`?)", dir, err)
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, nil, fmt.Errorf("resume %s: parse %s: %w", dir, MetaFile, err)
	}
	if old.PlanHash != hash {
		return nil, nil, fmt.Errorf("resume %s: the plan changed since it was started (plan %q hash %.12s, now %q hash %.12s); resume with the plan as run (ctrperf bench run --resume %s, without a plan file) or start a new --out",
			dir, old.Plan, old.PlanHash, p.Name, hash, dir)
	}
	var warns []string
	rep, err := results.RepairTail(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("resume %s: repair the last record: %w", dir, fsutil.Explain(err))
	}
	if rep.Removed > 0 {
		warns = append(warns, fmt.Sprintf("%s ended in a partial record (%d bytes: a run cut short by a crash or a full disk); it is removed and kept in %s, and that run is redone",
			filepath.Join(dir, results.FileName), rep.Removed, rep.KeptIn))
	}
	recs, err := results.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	done, err := finishedRuns(p, recs)
	if err != nil {
		return nil, nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	old.Resumed = append(old.Resumed, m.Started)
	if err := writeJSON(metaPath, old); err != nil {
		return nil, nil, err
	}
	return done, warns, nil
}

func quickNote(m Meta) string {
	var s []string
	if m.Quick {
		s = append(s, "--quick applied")
	}
	if len(m.Only) > 0 {
		s = append(s, "--only "+strings.Join(m.Only, ","))
	}
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// finishedRuns returns the run indexes that have a record (ok, failed or
// not_run): those are not redone. A record that does not fit the run order
// means the directory holds another plan's results.
func finishedRuns(p *plan.Plan, recs []results.RunRecord) (map[int]bool, error) {
	runs := p.Runs()
	done := map[int]bool{}
	for _, rec := range recs {
		if rec.Plan != p.Name || rec.Index < 0 || rec.Index >= len(runs) ||
			runs[rec.Index].Config != rec.Config || runs[rec.Index].Repetition != rec.Repetition {
			return nil, fmt.Errorf("record %s (plan %q, run %d, %s repetition %d) does not match the plan's run order", rec.RunID, rec.Plan, rec.Index, rec.Config, rec.Repetition)
		}
		switch rec.Status {
		case results.StatusOK, results.StatusFailed, results.StatusNotRun:
			done[rec.Index] = true
		}
	}
	return done, nil
}

// Env is the machine section of OUT/env.json (results.Machine, which the
// report reads).
type Env = results.Machine

// GatherEnv collects what a reader of the results needs to know about the
// machine: kernel, CPU model and count, memory, cgroup layout, read through fs.
func GatherEnv(_ context.Context, fs kernel.FS) any {
	e := Env{Time: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Ctrperf: version.Version}
	e.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
		e.Machine = unix.ByteSliceToString(u.Machine[:])
	}
	if m, err := kernel.MemTotal(fs.Proc()); err == nil {
		e.MemTotal = m
	} else if si := (unix.Sysinfo_t{}); unix.Sysinfo(&si) == nil {
		e.MemTotal = uint64(si.Totalram) * uint64(si.Unit)
	}
	e.CPUModel, _ = kernel.CPUModel(fs.Proc())
	e.BootID, _ = kernel.BootID(fs.Proc())
	e.Cgroups = string(fs.Cgroups().Mode)
	return e
}

// envDoc is OUT/env.json: the machine's facts and every engine the runs used.
type envDoc struct {
	Machine     json.RawMessage      `json:"machine,omitempty"`
	Engines     []engine.Info        `json:"engines,omitempty"`
	Concurrency *results.Concurrency `json:"concurrency,omitempty"`
	Hosts       []results.HostInfo   `json:"hosts,omitempty"`
}

// writeEnv records machine facts (when machine is non-nil and the file
// does not have them yet: a resumed plan keeps the facts of its start),
// merges engines into the engine list, and adds what conc says (an
// invocation that ran beside others; kept across resumes).
func writeEnv(dir string, machine any, engines map[string]engine.Info, conc *results.Concurrency) error {
	path := filepath.Join(dir, EnvFile)
	doc, err := readEnvDoc(path)
	if err != nil {
		return err
	}
	if machine != nil && len(doc.Machine) == 0 {
		b, err := json.Marshal(machine)
		if err != nil {
			return fmt.Errorf("encode environment facts: %w", err)
		}
		doc.Machine = b
	}
	if conc != nil {
		if doc.Concurrency == nil {
			doc.Concurrency = &results.Concurrency{}
		}
		doc.Concurrency.AllowConcurrent = doc.Concurrency.AllowConcurrent || conc.AllowConcurrent
		doc.Concurrency.Beside = append(doc.Concurrency.Beside, conc.Beside...)
	}
	for _, name := range slices.Sorted(maps.Keys(engines)) {
		i := slices.IndexFunc(doc.Engines, func(e engine.Info) bool { return e.Name == name })
		if i >= 0 {
			doc.Engines[i] = engines[name]
		} else {
			doc.Engines = append(doc.Engines, engines[name])
		}
	}
	return writeJSON(path, doc)
}

// readEnvDoc reads OUT/env.json as it is so far (empty when there is none).
func readEnvDoc(path string) (envDoc, error) {
	var doc envDoc
	if b, err := fsutil.ReadTrusted(path); err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			return doc, fmt.Errorf("parse %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return doc, fmt.Errorf("read %s: %w", path, err)
	}
	return doc, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644)
}
