// Package owner records who owns what ctrperf creates, so that `ctrperf
// clean` removes only what nobody is using and a second `bench run` knows
// the first is there.
//
// An owner is a process: a `bench run` session (all its runs, their
// containers, networks, client namespaces, private engines) or an isolate
// controller. It holds two files in an owners directory, both named after
// its kind and session:
//
//	<dir>/<kind>-<session>.lock  flock'd (exclusive) for as long as it lives
//	<dir>/<kind>-<session>.json  the Record, replaced atomically
//
// A record is live while its lock is held: the kernel drops a flock when
// its process dies, whatever the death, so liveness needs no pid guessing.
// Only when the lock file is gone (removed by hand, a tmpfs cleared) does
// it fall back to the pid and its start time (/proc/PID/stat), which
// survive pid reuse. Everything else is orphaned.
package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
)

// DefaultDir is where owners keep their records on a real machine.
const DefaultDir = "/run/ctrperf/owners"

// Kinds of owner.
const (
	KindBench   = "bench"   // a `bench run` session
	KindIsolate = "isolate" // an isolate controller (or a restore of its checkpoint)
	// KindAgent is a `ctrperf agent` session on a host of a plan's hosts:
	// it deploys there, and uses the shared private engines, for a bench
	// run elsewhere.
	KindAgent = "agent"
)

// Record is what an owner says about itself.
type Record struct {
	Kind string `json:"kind"`
	// Session names the owner among its kind; for a bench session it is the
	// run-id prefix <plan>-<session>: run ids <Session>-NNN are its runs.
	Session string `json:"session"`
	PID     int    `json:"pid"`
	// StartTime is the process's start in clock ticks after boot (field 22
	// of /proc/PID/stat): pid and start time name one process.
	StartTime uint64    `json:"start_time"`
	Host      string    `json:"host"`
	Command   []string  `json:"command"`
	Started   time.Time `json:"started"`
	Out       string    `json:"out,omitempty"` // a bench session's output directory
	// AllowConcurrent: started beside another live session on purpose.
	AllowConcurrent bool `json:"allow_concurrent,omitempty"`
	// Objects are the names the owner holds beyond its run-id prefix: run
	// ids as each run starts (their client namespaces are named by a hash
	// of the run id), private engines.
	Objects []string `json:"objects,omitempty"`
}

// Owns says whether an object of run id (or engine run id) runID belongs
// to the owner: the session itself, one of its runs, or a listed object.
func (r Record) Owns(runID string) bool {
	if runID == "" {
		return false
	}
	if r.Session != "" && (runID == r.Session || strings.HasPrefix(runID, r.Session+"-")) {
		return true
	}
	return slices.Contains(r.Objects, runID)
}

// String names the owner for people: pid, command, start, output.
func (r Record) String() string {
	s := fmt.Sprintf("pid %d (%s), started %s", r.PID, strings.Join(r.Command, " "), r.Started.Local().Format("2006-01-02 15:04:05"))
	if r.Host != "" {
		s += " on " + r.Host
	}
	if r.Out != "" {
		s += ", output " + r.Out
	}
	return s
}

func (r Record) base() string { return r.Kind + "-" + r.Session }

// Dir is an owners directory.
type Dir struct {
	Path   string    // DefaultDir when empty
	Kernel kernel.FS // where owners' start times are read (the zero FS: /proc)
}

func (d Dir) withDefaults() Dir {
	if d.Path == "" {
		d.Path = DefaultDir
	}
	return d
}

// Owner is a held record; Release it on exit.
type Owner struct {
	mu   sync.Mutex
	dir  Dir
	rec  Record
	lock *os.File
}

// HeldError is returned by Acquire when another live process holds the
// same kind and session.
type HeldError struct{ Holder Status }

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s %s is held by %s", e.Holder.Kind, e.Holder.Session, e.Holder.Record)
}

// Acquire takes ownership of rec's kind and session: it locks the lock file
// and writes the record, filling in this process's pid, start time, host,
// command line and the time when they are not set. When another live
// process holds them, the error is a *HeldError naming it.
func (d Dir) Acquire(rec Record) (*Owner, error) {
	d = d.withDefaults()
	if rec.Kind == "" || rec.Session == "" || strings.ContainsAny(rec.Kind+rec.Session, "/\x00") {
		return nil, fmt.Errorf("owner record: kind %q and session %q must be non-empty names", rec.Kind, rec.Session)
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return nil, fmt.Errorf("create owners directory %s: %w", d.Path, err)
	}
	if rec.PID == 0 {
		rec.PID = os.Getpid()
	}
	if rec.StartTime == 0 {
		st, err := kernel.ProcStartTime(d.Kernel.Proc(), rec.PID)
		if err != nil {
			return nil, fmt.Errorf("owner record: %w", err)
		}
		rec.StartTime = st
	}
	if rec.Host == "" {
		rec.Host, _ = os.Hostname()
	}
	if rec.Command == nil {
		rec.Command = os.Args
	}
	if rec.Started.IsZero() {
		rec.Started = time.Now()
	}
	rec.Started = rec.Started.UTC().Truncate(time.Second)

	lockPath := filepath.Join(d.Path, rec.base()+".lock")
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open owner lock %s: %w", lockPath, err)
	}
	// A checker holds the lock shared for an instant; wait that out, but
	// not a live owner.
	for i := 0; ; i++ {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || i == 50 {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				if held, rerr := d.read(filepath.Join(d.Path, rec.base()+".json")); rerr == nil {
					held.Live = true
					return nil, &HeldError{Holder: held}
				}
				return nil, &HeldError{Holder: Status{Record: Record{Kind: rec.Kind, Session: rec.Session}, Live: true, Reason: "lock " + lockPath + " is held"}}
			}
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := &Owner{dir: d, rec: rec, lock: f}
	if err := o.write(); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

func (o *Owner) write() error {
	b, err := json.MarshalIndent(o.rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode owner record: %w", err)
	}
	return fsutil.WriteFileAtomic(filepath.Join(o.dir.Path, o.rec.base()+".json"), append(b, '\n'), 0o644)
}

// Record is the owner's record as written.
func (o *Owner) Record() Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.rec
	r.Objects = slices.Clone(o.rec.Objects)
	return r
}

// Add records names the owner holds (run ids, engines) before it creates
// what they name.
func (o *Owner) Add(names ...string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lock == nil {
		return errors.New("owner record already released")
	}
	n := len(o.rec.Objects)
	for _, s := range names {
		if !slices.Contains(o.rec.Objects, s) {
			o.rec.Objects = append(o.rec.Objects, s)
		}
	}
	if len(o.rec.Objects) == n {
		return nil
	}
	return o.write()
}

// Release removes the record and the lock file and drops the lock. It is
// safe to call more than once.
func (o *Owner) Release() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lock == nil {
		return nil
	}
	var errs []error
	base := filepath.Join(o.dir.Path, o.rec.base())
	// The record first: a checker that still finds it falls back on the pid,
	// which is alive until we return: live, the safe answer.
	for _, p := range []string{base + ".json", base + ".lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("release owner: %w", err))
		}
	}
	errs = append(errs, o.lock.Close())
	o.lock = nil
	return errors.Join(errs...)
}

// Close is Release, so an owner closes with the files it guards.
func (o *Owner) Close() error { return o.Release() }

// Status is a record found in an owners directory and its liveness.
type Status struct {
	Record
	Live   bool   `json:"live"`
	Reason string `json:"reason"` // why it is live or orphaned
	Path   string `json:"path"`   // the record file
}

// List reads every record in the directory with its liveness, sorted by
// start. A record that cannot be read is an error, not hidden.
func (d Dir) List() ([]Status, error) {
	d = d.withDefaults()
	paths, err := filepath.Glob(filepath.Join(d.Path, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Status
	var errs []error
	for _, p := range paths {
		st, err := d.read(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int { return a.Started.Compare(b.Started) })
	return out, errors.Join(errs...)
}

// Live lists the live records of a kind ("" = every kind).
func (d Dir) Live(kind string) ([]Status, error) {
	all, err := d.List()
	var out []Status
	for _, s := range all {
		if s.Live && (kind == "" || s.Kind == kind) {
			out = append(out, s)
		}
	}
	return out, err
}

func (d Dir) read(path string) (Status, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Status{}, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Status{}, fmt.Errorf("owner record %s: %w", path, err)
	}
	st := Status{Record: rec, Path: path}
	st.Live, st.Reason = d.alive(rec, strings.TrimSuffix(path, ".json")+".lock")
	return st, nil
}

// alive is the liveness rule: the lock held, or, without a lock file, the
// same process (pid and start time) still running.
func (d Dir) alive(rec Record, lockPath string) (bool, string) {
	f, err := os.Open(lockPath)
	if err == nil {
		defer f.Close()
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, "its lock is held"
		}
		if err == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			return false, "its lock is free: the owner is gone"
		}
		// A lock we cannot test: decide by the process.
	}
	if !kernel.ProcAlive(d.Kernel.Proc(), rec.PID) {
		return false, fmt.Sprintf("pid %d is gone", rec.PID)
	}
	st, err := kernel.ProcStartTime(d.Kernel.Proc(), rec.PID)
	if err != nil {
		return false, fmt.Sprintf("pid %d: %v", rec.PID, err)
	}
	if st != rec.StartTime {
		return false, fmt.Sprintf("pid %d is another process now (started at tick %d, the owner at %d)", rec.PID, st, rec.StartTime)
	}
	return true, "no lock file, but pid and start time match"
}

// Reap removes an orphaned record and its lock file, once what it owned is
// cleaned. It checks again under the lock, so an owner that took the same
// session meanwhile keeps its record.
func (d Dir) Reap(st Status) error {
	d = d.withDefaults()
	base := strings.TrimSuffix(st.Path, ".json")
	if base == st.Path || filepath.Dir(base) != filepath.Clean(d.Path) {
		return fmt.Errorf("reap %s: not a record of %s", st.Path, d.Path)
	}
	f, err := os.Open(base + ".lock")
	if err == nil {
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			return nil // live again, or being checked: leave it
		}
	} else if cur, err := d.read(st.Path); err != nil || cur.Live {
		return nil
	}
	var errs []error
	for _, p := range []string{st.Path, base + ".lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("reap owner record: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Owners answers, for objects found on the machine, who owns them.
type Owners []Status

// Of returns the owner of an object of run id runID, and whether one has a
// record at all. Among several, a live one wins.
func (ow Owners) Of(runID string) (Status, bool) {
	var found Status
	ok := false
	for _, s := range ow {
		if s.Owns(runID) {
			if s.Live {
				return s, true
			}
			found, ok = s, true
		}
	}
	return found, ok
}

// LiveRunIDs are the run ids live owners listed (Record.Objects).
func (ow Owners) LiveRunIDs() []string {
	var out []string
	for _, s := range ow {
		if s.Live {
			out = append(out, s.Objects...)
		}
	}
	return out
}

// AnyLive says whether a live owner of kind exists.
func (ow Owners) AnyLive(kind string) (Status, bool) {
	for _, s := range ow {
		if s.Live && s.Kind == kind {
			return s, true
		}
	}
	return Status{}, false
}

// Describe says whose an object of runID is, for people: "live: <owner>",
// "orphaned: <owner> (<reason>)" or "orphaned: no owner record".
func (ow Owners) Describe(runID string) (live bool, who string) {
	s, ok := ow.Of(runID)
	if !ok {
		return false, "no owner record"
	}
	if s.Live {
		return true, s.Record.String()
	}
	return false, s.Record.String() + ": " + s.Reason
}
