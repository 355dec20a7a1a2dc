package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestStackRunsLIFOAndKeepsGoing(t *testing.T) {
	var s Stack
	var order []string
	s.Push("first", func(context.Context) error { order = append(order, "first"); return nil })
	s.Push("failing", func(context.Context) error { order = append(order, "failing"); return errors.New("boom") })
	s.Push("last", func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("cleanup got a dead context: %v", ctx.Err())
		}
		order = append(order, "last")
		return nil
	})
	err := s.Run(time.Second)
	if got := strings.Join(order, ","); got != "last,failing,first" {
		t.Errorf("order = %s, want last,failing,first", got)
	}
	if err == nil || !strings.Contains(err.Error(), "cleanup failing: boom") {
		t.Errorf("err = %v, want the failing step named", err)
	}
	if s.Len() != 0 {
		t.Errorf("stack not empty after Run: %d", s.Len())
	}
	if err := s.Run(time.Second); err != nil {
		t.Errorf("second Run = %v, want nil (each cleanup runs once)", err)
	}
}

func TestDetachedSurvivesParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	ctx, c2 := Detached(parent, time.Minute)
	defer c2()
	if ctx.Err() != nil {
		t.Fatalf("detached context is cancelled: %v", ctx.Err())
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Error("detached context has no deadline")
	}
}

func TestSignalContextFirstCancelsSecondForces(t *testing.T) {
	var s Stack
	forced := make(chan struct{})
	s.Push("force", func(context.Context) error { close(forced); return nil })
	exited := make(chan int, 1)
	ctx, stop := SignalContext(context.Background(), WithForceCleanup(&s, time.Second),
		withExit(func(code int) { exited <- code }), WithMessages(nil))
	defer stop()

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not cancelled by SIGTERM")
	}
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "terminated") {
		t.Errorf("cause = %v, want the signal named", cause)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit code = %d, want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second signal did not exit")
	}
	select {
	case <-forced:
	default:
		t.Error("force cleanup did not run before exit")
	}
}

// fakeSignals stands in for os/signal: the test delivers signals to the
// channels subscribed to them, as the runtime would (never blocking).
type fakeSignals struct {
	mu   sync.Mutex
	subs map[os.Signal][]chan<- os.Signal
}

func (f *fakeSignals) notify(c chan<- os.Signal, sigs ...os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[os.Signal][]chan<- os.Signal{}
	}
	for _, s := range sigs {
		f.subs[s] = append(f.subs[s], c)
	}
}

func (f *fakeSignals) stop(c chan<- os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s, cs := range f.subs {
		f.subs[s] = slices.DeleteFunc(cs, func(x chan<- os.Signal) bool { return x == c })
	}
}

func (f *fakeSignals) send(s os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.subs[s] {
		select {
		case c <- s:
		default:
		}
	}
}

func (f *fakeSignals) subscribed(s os.Signal) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs[s])
}

// brokenTerminal fails every write as a tty does after a hangup.
type brokenTerminal struct{}

func (brokenTerminal) Write([]byte) (int, error) { return 0, syscall.EIO }

func TestSignalContextWithInjectedSignals(t *testing.T) {
	tests := []struct {
		desc      string
		signals   []os.Signal
		gone      bool   // messages go to a terminal that is gone (EIO)
		wantCause string // in the context's cause
		forced    bool   // the force cleanup ran to its end, then exit(130)
	}{
		{desc: "SIGTERM stops like Ctrl-C", signals: []os.Signal{syscall.SIGTERM}, wantCause: "terminated"},
		{desc: "SIGHUP (terminal closed) stops like Ctrl-C", signals: []os.Signal{syscall.SIGHUP}, wantCause: "hangup"},
		{desc: "Ctrl-C", signals: []os.Signal{os.Interrupt}, wantCause: "interrupt"},
		{desc: "a second signal forces the teardown, then exits", signals: []os.Signal{os.Interrupt, syscall.SIGHUP}, wantCause: "interrupt", forced: true},
		{desc: "further signals do not cut the forced teardown short", signals: []os.Signal{syscall.SIGTERM, syscall.SIGTERM, os.Interrupt, syscall.SIGHUP}, wantCause: "terminated", forced: true},
		{desc: "messages to a terminal that is gone change nothing", signals: []os.Signal{syscall.SIGHUP, syscall.SIGTERM}, gone: true, wantCause: "hangup", forced: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var fs fakeSignals
			var s Stack
			release := make(chan struct{})
			var mu sync.Mutex
			var events []string
			note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
			s.Push("engines", func(context.Context) error { note("engines"); return nil })
			s.Push("run", func(ctx context.Context) error {
				<-release // a teardown that takes a while
				note("run")
				return nil
			})
			exited := make(chan int, 1)
			opts := []Option{WithForceCleanup(&s, time.Minute), withExit(func(code int) { note("exit"); exited <- code }),
				withNotify(fs.notify, fs.stop)}
			var msgs bytes.Buffer
			if tt.gone {
				opts = append(opts, WithMessages(brokenTerminal{}))
			} else {
				opts = append(opts, WithMessages(&msgs))
			}
			ctx, stop := SignalContext(context.Background(), opts...)
			for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE} {
				if fs.subscribed(sig) != 1 {
					t.Errorf("%v: %d subscriptions, want 1", sig, fs.subscribed(sig))
				}
			}
			fs.send(tt.signals[0])
			<-ctx.Done()
			if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), tt.wantCause) {
				t.Errorf("cause = %v, want %q", cause, tt.wantCause)
			}
			for _, sig := range tt.signals[1:] {
				fs.send(sig)
				time.Sleep(10 * time.Millisecond)
			}
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			if tt.forced {
				select {
				case <-exited:
					t.Fatal("exited before the forced teardown ended")
				case <-stopped:
					t.Fatal("stop returned while the forced teardown was under way")
				case <-time.After(50 * time.Millisecond):
				}
			}
			close(release)
			<-stopped
			mu.Lock()
			got := strings.Join(events, ",")
			mu.Unlock()
			want := ""
			if tt.forced {
				want = "run,engines,exit"
			}
			if got != want {
				t.Errorf("events %q, want %q", got, want)
			}
			if fs.subscribed(syscall.SIGHUP)+fs.subscribed(syscall.SIGPIPE) != 0 {
				t.Error("stop left signal subscriptions behind")
			}
			if tt.forced && !tt.gone && !strings.Contains(msgs.String(), "forcing the teardown") {
				t.Errorf("messages: %q", msgs.String())
			}
		})
	}
}

func TestStopSignalsIncludeHangup(t *testing.T) {
	for _, want := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !slices.Contains(StopSignals, want) {
			t.Errorf("StopSignals lacks %v", want)
		}
	}
}

// A real SIGHUP cancels the context instead of killing the process, and
// while the context lives a write to a closed pipe on stdout fails with
// EPIPE instead of killing it (the child process checks both).
func TestSignalContextSurvivesHangupAndBrokenPipe(t *testing.T) {
	if os.Getenv("LIFECYCLE_CHILD") == "1" {
		ctx, stop := SignalContext(context.Background(), WithMessages(nil))
		defer stop()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			os.Exit(3)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			os.Exit(4)
		}
		_, err := os.Stdout.Write([]byte("into a closed pipe\n"))
		if !errors.Is(err, syscall.EPIPE) {
			os.Stderr.WriteString("write error: " + errString(err) + "\n")
			os.Exit(5)
		}
		os.Stderr.WriteString("survived\n")
		os.Exit(0)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads: the pipe is broken
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalContextSurvivesHangupAndBrokenPipe$")
	cmd.Env = append(os.Environ(), "LIFECYCLE_CHILD=1")
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	if err != nil || !strings.Contains(stderr.String(), "survived") {
		t.Fatalf("child: %v, stderr %q; want it to survive SIGHUP and EPIPE", err, stderr.String())
	}
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
