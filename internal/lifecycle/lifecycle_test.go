package lifecycle

import (
	"context"
	"errors"
	"os"
	"strings"
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
