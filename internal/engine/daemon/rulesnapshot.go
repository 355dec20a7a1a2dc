package daemon

// The rules of the DOCKER* chains (see iptables.go) are only safe while a
// starting dockerd runs if their snapshot outlives the process that took
// it: Ctrl-C, a start timeout, a dockerd that dies or a SIGKILL of ctrperf
// between the dockerd's flush and the put-back would otherwise lose the
// published-port rules of the user's engine for good. So the snapshot is a
// file in the engine's state directory, written (fsync'd, 0600) before the
// dockerd starts and removed only once the rules are back; whoever finds it
// later (teardown, `ctrperf clean`, the engine's next start) puts the rules
// back when its writer is gone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
)

// ruleSnapshotFile is the snapshot's name in the engine's state directory.
const ruleSnapshotFile = "iptables-before.json"

// procIdentity names one process for the life of the machine: a reused pid
// has another start time.
type procIdentity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks after boot
}

// ruleSnapshot is the DOCKER* chains (and the jumps into them) as they were
// before an engine's dockerd started, with the process that took it.
type ruleSnapshot struct {
	Engine string       `json:"engine"`
	Owner  procIdentity `json:"owner"`
	Taken  time.Time    `json:"taken"`
	Rules  []ipRule     `json:"rules"`
}

func ruleSnapshotPath(o Options, name string) string {
	return filepath.Join(stateDir(o, name), ruleSnapshotFile)
}

// identify reads who pid is now; ok is false when no such process runs.
func (o Options) identify(pid int) (procIdentity, bool) {
	if !kernel.ProcAlive(o.Kernel.Proc(), pid) {
		return procIdentity{}, false
	}
	st, err := kernel.ProcStartTime(o.Kernel.Proc(), pid)
	if err != nil {
		return procIdentity{}, false
	}
	return procIdentity{PID: pid, StartTime: st}, true
}

// writeRuleSnapshot records before as the rules to put back for engine
// name, replacing the file atomically and durably.
func writeRuleSnapshot(o Options, name string, before []ipRule) error {
	self, ok := o.identify(os.Getpid())
	if !ok {
		return fmt.Errorf("iptables snapshot of engine %s: cannot read this process (pid %d) under %s", name, os.Getpid(), o.Kernel.Proc())
	}
	b, err := json.MarshalIndent(ruleSnapshot{Engine: name, Owner: self, Taken: time.Now().UTC(), Rules: before}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode iptables snapshot of engine %s: %w", name, err)
	}
	dir := stateDir(o, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create engine state dir %s: %w", dir, err)
	}
	if err := fsutil.WriteFileAtomic(ruleSnapshotPath(o, name), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write iptables snapshot of engine %s: %w", name, err)
	}
	return nil
}

// readRuleSnapshot reads engine name's snapshot, not following a symlink;
// an absent file is (nil, nil).
func readRuleSnapshot(o Options, name string) (*ruleSnapshot, error) {
	p := ruleSnapshotPath(o, name)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open iptables snapshot %s: %w", p, err)
	}
	defer f.Close()
	s, err := parseRuleSnapshot(f)
	if err != nil {
		return nil, fmt.Errorf("parse iptables snapshot %s: %w", p, err)
	}
	return s, nil
}

func parseRuleSnapshot(r io.Reader) (*ruleSnapshot, error) {
	var s ruleSnapshot
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, err
	}
	if s.Owner.PID <= 0 {
		return nil, errors.New("snapshot names no owner process")
	}
	for i, r := range s.Rules {
		if r.Table == "" || r.Chain == "" {
			return nil, fmt.Errorf("rule %d has no table or chain: %+v", i, r)
		}
	}
	return &s, nil
}

func removeRuleSnapshot(o Options, name string) error {
	if err := os.Remove(ruleSnapshotPath(o, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove iptables snapshot of engine %s: %w", name, err)
	}
	return nil
}

// snapshotOrphaned decides whether a snapshot is to be put back by someone
// other than its writer: yes when the writer is this process (its start
// failed and left the file) or is gone (now is who runs under the writer's
// pid, running false when nobody does, or another process reusing it).
// A live writer is still inside its start, or will put the rules back
// itself.
func snapshotOrphaned(owner, self, now procIdentity, running bool) bool {
	if owner == self {
		return true
	}
	return !running || now != owner
}

// putBackRules restores the rules of before that are missing now and then
// drops engine name's snapshot; a failed restore keeps the snapshot for the
// next teardown or `ctrperf clean`. The caller holds the iptables lock and
// has stopped the dockerd that flushed them, or it has answered (it
// flushes only while it starts).
func putBackRules(ctx context.Context, o Options, name string, ipt iptablesRunner, before []ipRule) ([]ipRule, error) {
	restored, err := restoreRules(ctx, ipt, before, o.linkExists)
	if err != nil {
		return restored, fmt.Errorf("%w (the rules stay in %s for `ctrperf clean`)", err, ruleSnapshotPath(o, name))
	}
	return restored, removeRuleSnapshot(o, name)
}

// putBackLeftRules restores the snapshot a start of engine name left
// behind (its writer died or failed to put the rules back), if there is
// one and its writer is gone. The caller holds the iptables lock and has
// stopped the engine's dockerd.
func putBackLeftRules(ctx context.Context, o Options, name string, ipt iptablesRunner) ([]ipRule, error) {
	s, err := readRuleSnapshot(o, name)
	if err != nil || s == nil {
		return nil, err
	}
	self, _ := o.identify(os.Getpid())
	now, running := o.identify(s.Owner.PID)
	if !snapshotOrphaned(s.Owner, self, now, running) {
		return nil, fmt.Errorf("iptables snapshot %s belongs to pid %d, which still runs: not putting its rules back", ruleSnapshotPath(o, name), s.Owner.PID)
	}
	return putBackRules(ctx, o, name, ipt, s.Rules)
}

// restoreLeftSnapshot is putBackLeftRules for teardown: it takes the
// iptables lock only when there is a snapshot.
func restoreLeftSnapshot(ctx context.Context, o Options, name string, ipt iptablesRunner) ([]ipRule, error) {
	if _, err := os.Lstat(ruleSnapshotPath(o, name)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	unlock, err := lockIPTables(o)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return putBackLeftRules(ctx, o, name, ipt)
}

// guardedStart is what spawnGuarded did to the shared chains around a
// dockerd's start.
type guardedStart struct {
	Restored []ipRule // rules of other engines put back after the flush
	Added    []ipRule // jumps into DOCKER* the new dockerd made
	// Errors that did not fail the start: putting the rules back (they
	// stay in the snapshot file for teardown or `ctrperf clean`), listing
	// the jumps.
	RestoreErr, JumpsErr error
}

// spawnGuarded runs spawn, a start of st's dockerd (which flushes the
// DOCKER* chains every engine shares), between a snapshot of those chains
// on disk and their restore, under the iptables lock. When spawn fails
// (timeout, cancelled context, a dockerd that exited) the dockerd is
// stopped first, so it cannot flush after the restore.
func spawnGuarded(ctx context.Context, o Options, st *State, ipt iptablesRunner, spawn func() (*Daemon, error)) (*Daemon, guardedStart, error) {
	var g guardedStart
	unlock, err := lockIPTables(o)
	if err != nil {
		return nil, g, err
	}
	defer unlock()
	// A snapshot of an earlier start of this engine that died in its
	// window goes back first, or the new one would hide its rules.
	if _, err := putBackLeftRules(ctx, o, st.Name, ipt); err != nil {
		return nil, g, err
	}
	before, err := saveAll(ctx, ipt)
	if err != nil {
		return nil, g, fmt.Errorf("snapshot iptables before starting engine %s: %w", st.Name, err)
	}
	if err := writeRuleSnapshot(o, st.Name, before); err != nil {
		return nil, g, err
	}
	// The restore must happen even when ctx ends (Ctrl-C) meanwhile.
	rctx := context.WithoutCancel(ctx)
	d, err := spawn()
	if err != nil {
		stopEngineProcesses(o, st)
		if _, rerr := putBackRules(rctx, o, st.Name, ipt, before); rerr != nil {
			err = fmt.Errorf("%w; putting back the iptables rules it flushed also failed: %v", err, rerr)
		}
		return nil, g, err
	}
	g.Restored, g.RestoreErr = putBackRules(rctx, o, st.Name, ipt, before)
	// Still under the lock: no other engine's start adds jumps meanwhile.
	g.Added, g.JumpsErr = addedJumps(rctx, ipt, before)
	return d, g, nil
}
