package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// snapshotOptions are roots in a temporary directory: a proc root holding
// this process (start time selfStart) and the processes procs names (pid →
// start time), and a sys root where the fixture's interfaces exist.
func snapshotOptions(t *testing.T, procs map[int]uint64) Options {
	t.Helper()
	dir := t.TempDir()
	o := buildOptions([]Option{WithRunDir(filepath.Join(dir, "run")), WithLibDir(filepath.Join(dir, "lib")),
		WithKernel(kernel.NewFS(kernel.Roots{Proc: filepath.Join(dir, "proc"), Sys: filepath.Join(dir, "sys")}))})
	all := map[int]uint64{os.Getpid(): selfStart}
	for pid, st := range procs {
		all[pid] = st
	}
	for pid, start := range all {
		p := o.Kernel.Proc(fmt.Sprint(pid))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		// Fields 3 (state) to 22 (starttime) after the command name.
		stat := fmt.Sprintf("%d (ctrperf x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, start)
		if err := os.WriteFile(filepath.Join(p, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, link := range []string{"docker0", "ctrperf1a2b3c4d"} {
		if err := os.MkdirAll(filepath.Join(kernel.ClassNetDir(o.Kernel.Sys()), link), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

const selfStart = 4242

// flushed is what a starting dockerd leaves of rules: the DOCKER chains
// emptied but for its own bridge's rule.
func flushed(rules []ipRule) []ipRule {
	var out []ipRule
	for _, r := range rules {
		if !strings.HasPrefix(r.Chain, "DOCKER") {
			out = append(out, r)
		}
	}
	return append(out, ipRule{Table: "nat", Chain: "DOCKER", Args: []string{"-i", "ctrperf99999999", "-j", "RETURN"}})
}

func TestRuleSnapshotRoundTrip(t *testing.T) {
	tests := []struct {
		desc  string
		rules []ipRule
	}{
		{"the fixture's nat rules, a quoted comment among them", fixtureRules(t)},
		{"no rules at all", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o := snapshotOptions(t, nil)
			if err := writeRuleSnapshot(o, "ctrperf-e1", tt.rules); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(ruleSnapshotPath(o, "ctrperf-e1"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o600 {
				t.Errorf("mode %v, want -rw-------", fi.Mode())
			}
			s, err := readRuleSnapshot(o, "ctrperf-e1")
			if err != nil {
				t.Fatal(err)
			}
			if want := (procIdentity{PID: os.Getpid(), StartTime: selfStart}); s.Owner != want || s.Engine != "ctrperf-e1" {
				t.Errorf("owner %+v of engine %q, want %+v of ctrperf-e1", s.Owner, s.Engine, want)
			}
			if len(s.Rules) != len(tt.rules) || (len(tt.rules) > 0 && !reflect.DeepEqual(s.Rules, tt.rules)) {
				t.Errorf("rules read back %v, want %v", s.Rules, tt.rules)
			}
			if err := removeRuleSnapshot(o, "ctrperf-e1"); err != nil {
				t.Fatal(err)
			}
			if s, err := readRuleSnapshot(o, "ctrperf-e1"); s != nil || err != nil {
				t.Errorf("after remove: %v, %v; want none", s, err)
			}
		})
	}
}

func TestReadRuleSnapshotRejects(t *testing.T) {
	tests := []struct {
		desc    string
		setup   func(t *testing.T, p string)
		wantErr string
	}{
		{"a symlink is not followed", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			os.WriteFile(target, []byte(`{"owner":{"pid":1},"rules":[]}`), 0o600)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, syscall.ELOOP.Error()},
		{"a cut file", func(t *testing.T, p string) { os.WriteFile(p, []byte(`{"owner":{"pid":1`), 0o600) }, "unexpected EOF"},
		{"no owner", func(t *testing.T, p string) { os.WriteFile(p, []byte(`{"rules":[]}`), 0o600) }, "no owner"},
		{"a rule without a table", func(t *testing.T, p string) {
			os.WriteFile(p, []byte(`{"owner":{"pid":1},"rules":[{"Chain":"DOCKER","Args":["-j","RETURN"]}]}`), 0o600)
		}, "no table"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o := snapshotOptions(t, nil)
			if err := os.MkdirAll(stateDir(o, "ctrperf-e1"), 0o700); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, ruleSnapshotPath(o, "ctrperf-e1"))
			s, err := readRuleSnapshot(o, "ctrperf-e1")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("read = %+v, %v; want an error with %q", s, err, tt.wantErr)
			}
		})
	}
}

func TestSnapshotOrphaned(t *testing.T) {
	owner := procIdentity{PID: 100, StartTime: 5}
	self := procIdentity{PID: 200, StartTime: 7}
	tests := []struct {
		desc    string
		owner   procIdentity
		now     procIdentity
		running bool
		want    bool
	}{
		{"the writer still runs: it is inside its start or puts them back itself", owner, owner, true, false},
		{"the writer is gone (SIGKILL)", owner, procIdentity{}, false, true},
		{"the writer's pid is another process now", owner, procIdentity{PID: 100, StartTime: 9}, true, true},
		{"this process wrote it and its start failed", self, self, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := snapshotOrphaned(tt.owner, self, tt.now, tt.running); got != tt.want {
				t.Errorf("snapshotOrphaned = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRestoreLeftSnapshot: what teardown (and so `ctrperf clean`) does with
// a snapshot a start left in the engine's state dir.
func TestRestoreLeftSnapshot(t *testing.T) {
	const livePID, deadPID, reusedPID = 300, 301, 302
	tests := []struct {
		desc         string
		owner        procIdentity // "" = no snapshot
		wantRestored int
		wantErr      string
		wantKept     bool
	}{
		{"no snapshot: nothing to do", procIdentity{}, 0, "", false},
		{"the writer was killed: the rules go back", procIdentity{PID: deadPID, StartTime: 1}, 4, "", false},
		{"the writer's pid was reused: the rules go back", procIdentity{PID: reusedPID, StartTime: 1}, 4, "", false},
		{"this process's failed start: the rules go back", procIdentity{PID: os.Getpid(), StartTime: selfStart}, 4, "", false},
		{"the writer still runs: kept for it", procIdentity{PID: livePID, StartTime: 1}, 0, "still runs", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o := snapshotOptions(t, map[int]uint64{livePID: 1, reusedPID: 2})
			before := fixtureRules(t)
			f := &fakeIPT{rules: flushed(before)}
			if tt.owner.PID != 0 {
				writeSnapshotAs(t, o, "ctrperf-e1", tt.owner, before)
			}
			restored, err := restoreLeftSnapshot(context.Background(), o, "ctrperf-e1", f)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if len(restored) != tt.wantRestored {
				t.Errorf("restored %d rules, want %d: %v", len(restored), tt.wantRestored, restored)
			}
			if tt.wantRestored > 0 {
				if m := missingRules(dockerChainRules(before), dockerChainRules(f.rules)); len(m) != 0 {
					t.Errorf("still missing: %v", m)
				}
			}
			_, serr := os.Lstat(ruleSnapshotPath(o, "ctrperf-e1"))
			if kept := serr == nil; kept != tt.wantKept {
				t.Errorf("snapshot kept = %v, want %v", kept, tt.wantKept)
			}
		})
	}
}

// writeSnapshotAs writes a snapshot as if process owner had taken it.
func writeSnapshotAs(t *testing.T, o Options, name string, owner procIdentity, rules []ipRule) {
	t.Helper()
	if err := os.MkdirAll(stateDir(o, name), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ruleSnapshot{Engine: name, Owner: owner, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ruleSnapshotPath(o, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSpawnGuarded: the snapshot is on disk before dockerd starts, and
// whatever becomes of the start, the flushed rules are back afterwards and
// the snapshot gone.
func TestSpawnGuarded(t *testing.T) {
	tests := []struct {
		desc    string
		spawn   error // what the start returns after the flush
		wantErr string
	}{
		{"the engine answers", nil, ""},
		{"the start times out", errors.New("dockerd for engine ctrperf-e1 did not answer within 1s"), "did not answer"},
		{"Ctrl-C during the start", context.Canceled, "canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o := snapshotOptions(t, nil)
			st := newState(o, "ctrperf-e1", "r1", engine.EngineSpec{})
			before := fixtureRules(t)
			f := &fakeIPT{rules: append([]ipRule(nil), before...)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d, g, err := spawnGuarded(ctx, o, st, f, func() (*Daemon, error) {
				s, err := readRuleSnapshot(o, st.Name)
				if err != nil || s == nil || len(s.Rules) != len(before) {
					t.Errorf("no snapshot of the %d rules on disk when dockerd starts: %v, %v", len(before), s, err)
				}
				f.rules = flushed(f.rules)
				if errors.Is(tt.spawn, context.Canceled) {
					cancel()
				}
				if tt.spawn != nil {
					return nil, tt.spawn
				}
				return &Daemon{name: st.Name}, nil
			})
			if tt.wantErr == "" && (err != nil || d == nil) || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("spawnGuarded = %v, %v; want %q", d, err, tt.wantErr)
			}
			if g.RestoreErr != nil {
				t.Errorf("restore: %v", g.RestoreErr)
			}
			if m := missingRules(dockerChainRules(before), dockerChainRules(f.rules)); len(m) != 0 {
				t.Errorf("rules still missing after the start: %v", m)
			}
			if s, err := readRuleSnapshot(o, st.Name); s != nil || err != nil {
				t.Errorf("snapshot left after the start: %v, %v", s, err)
			}
		})
	}
}
