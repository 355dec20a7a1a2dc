package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"ctrperf/internal/kernel"
)

// clean must not tear down an engine a run is starting or sharing (issue
// 24 item 8): CleanEngines waits for the engine's lock and decides only
// then, on owners read at that moment (here: keep sees whether the run
// got going while clean waited).
func TestCleanEnginesWaitsForAStartingRun(t *testing.T) {
	tests := []struct {
		desc     string
		runStart bool // a run holds the lock and becomes an owner meanwhile
		wantKept bool
	}{
		{desc: "a run starting the engine while clean waits keeps it", runStart: true, wantKept: true},
		{desc: "no run: the engine is removed", runStart: false, wantKept: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			proc := filepath.Join(dir, "proc")
			if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(proc, "self", "mountinfo"), []byte("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := []Option{WithRunDir(filepath.Join(dir, "run")), WithLibDir(filepath.Join(dir, "lib")), WithKernel(kernel.NewFS(kernel.Roots{Proc: proc, Sys: filepath.Join(dir, "sys")}))}
			o := buildOptions(opts)
			if err := writeState(o, &State{Name: defaultName}); err != nil {
				t.Fatal(err)
			}
			var owned atomic.Bool
			var unlock func()
			if tc.runStart {
				var err error
				if unlock, err = lockEngine(o, defaultName); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() {
				_, err := CleanEngines(context.Background(), "", func(State) bool { return owned.Load() }, opts...)
				done <- err
			}()
			if tc.runStart {
				select {
				case err := <-done:
					t.Fatalf("clean went ahead while a run held the engine's lock (%v)", err)
				case <-time.After(200 * time.Millisecond):
				}
				owned.Store(true) // the run's owner record is there before it starts the engine
				unlock()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("clean never got the engine's lock")
			}
			_, err := readState(o, defaultName)
			if kept := err == nil; kept != tc.wantKept {
				t.Errorf("engine kept %v (%v), want %v", kept, err, tc.wantKept)
			}
		})
	}
}

// A waiter whose lock file a teardown removed meanwhile locks the new
// file, so it never holds the lock beside a newer holder.
func TestLockEngineAfterTheFileWasRemoved(t *testing.T) {
	o := buildOptions([]Option{WithRunDir(t.TempDir())})
	unlock, err := lockEngine(o, "e")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := lockEngine(o, "e")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	time.Sleep(100 * time.Millisecond)
	if err := os.Remove(filepath.Join(o.enginesDir(), "e.lock")); err != nil {
		t.Fatal(err)
	}
	unlock()
	u2 := <-got
	// A third taker must wait for the second: they share the file.
	third := make(chan struct{})
	go func() {
		u3, err := lockEngine(o, "e")
		if err == nil {
			u3()
		}
		close(third)
	}()
	select {
	case <-third:
		t.Fatal("a third holder got the lock beside the second")
	case <-time.After(200 * time.Millisecond):
	}
	u2()
	<-third
}
