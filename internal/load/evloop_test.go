package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// batchThreads counts this process's threads in SCHED_BATCH.
func batchThreads(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil && attr.Policy == unix.SCHED_BATCH {
			n++ // a thread that ended meanwhile is simply not counted
		}
	}
	return n
}

func TestEventLoopsRunAsBatchThreads(t *testing.T) {
	var most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := int64(batchThreads(t)); n > most.Load() {
			most.Store(n)
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	d.noLoop = false // this test is about the event loops, in both of TestMain's passes
	if !d.loopable() {
		t.Fatal("a single GET in a closed loop does not run on the event loops")
	}
	m, err := Run(context.Background(), d, Profile{Concurrency: 4, Ops: 200, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if op := m.Operations["GET /"]; op == nil || op.Count != 200 || op.ErrorCount() != 0 {
		t.Fatalf("operations %+v, want 200 GETs without errors", m.Operations)
	}
	if most.Load() < 1 {
		t.Error("no thread of the process was in SCHED_BATCH while the event loops ran")
	}
}

func TestBatchThread(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		policy     uint32
		nice       int32
		changed    bool
		wantPolicy uint32
	}{
		{"ordinary thread becomes batch", unix.SCHED_NORMAL, 0, true, unix.SCHED_BATCH},
		{"its nice value is kept", unix.SCHED_NORMAL, 7, true, unix.SCHED_BATCH},
		{"a batch thread stays batch", unix.SCHED_BATCH, 3, false, unix.SCHED_BATCH},
		{"an idle-class thread is left alone", unix.SCHED_IDLE, 0, false, unix.SCHED_IDLE},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			type result struct {
				changed bool
				attr    *unix.SchedAttr
				err     error
			}
			done := make(chan result)
			go func() {
				// Never unlocked: the thread ends with the goroutine, so
				// the policies set here reach no other test.
				runtime.LockOSThread()
				var r result
				if r.err = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: tc.policy, Nice: tc.nice}, 0); r.err == nil {
					r.changed = batchThread()
					r.attr, r.err = unix.SchedGetAttr(0, 0)
				}
				done <- r
			}()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.changed != tc.changed || r.attr.Policy != tc.wantPolicy || r.attr.Nice != tc.nice {
				t.Errorf("batchThread() = %v, policy %d nice %d; want %v, policy %d nice %d", r.changed, r.attr.Policy, r.attr.Nice, tc.changed, tc.wantPolicy, tc.nice)
			}
		})
	}
}
