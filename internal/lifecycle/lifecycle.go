// Package lifecycle makes a run stoppable without leaks: a context that is
// cancelled by SIGINT/SIGTERM, and a teardown stack whose cleanups still run
// (each with a fresh deadline) after that context is gone.
//
// The first signal asks the run to stop: the context is cancelled, the code
// unwinds and its deferred teardowns run. A second signal means the user is
// not willing to wait: the force hooks run best-effort with a short deadline
// and the process exits at once with status 130.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// DefaultCleanupTimeout bounds each cleanup step when the caller gives none.
const DefaultCleanupTimeout = 60 * time.Second

// Option configures SignalContext.
type Option func(*signalConfig)

type signalConfig struct {
	force        *Stack
	forceTimeout time.Duration
	exit         func(int)
	stderr       io.Writer
	signals      []os.Signal
}

// WithForceCleanup runs s (LIFO, each step bounded by timeout) when a second
// signal arrives, before the process exits.
func WithForceCleanup(s *Stack, timeout time.Duration) Option {
	return func(c *signalConfig) { c.force, c.forceTimeout = s, timeout }
}

// withExit replaces os.Exit (tests).
func withExit(exit func(int)) Option { return func(c *signalConfig) { c.exit = exit } }

// WithMessages sends the "stopping…" notices to w instead of stderr (nil: silent).
func WithMessages(w io.Writer) Option { return func(c *signalConfig) { c.stderr = w } }

// SignalContext returns a context cancelled on the first SIGINT or SIGTERM.
// A second signal runs the force cleanups (if any) and exits with 130. stop
// releases the signal handler; call it when the run is over.
func SignalContext(parent context.Context, opts ...Option) (context.Context, func()) {
	cfg := signalConfig{
		forceTimeout: 10 * time.Second,
		exit:         os.Exit,
		stderr:       os.Stderr,
		signals:      []os.Signal{os.Interrupt, syscall.SIGTERM},
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, cfg.signals...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			if cfg.stderr != nil {
				fmt.Fprintf(cfg.stderr, "ctrperf: %v: stopping and cleaning up (send it again to exit now)\n", sig)
			}
			cancel(fmt.Errorf("received %v", sig))
		case <-done:
			return
		}
		select {
		case sig := <-ch:
			if cfg.stderr != nil {
				fmt.Fprintf(cfg.stderr, "ctrperf: %v again: exiting now; run `ctrperf clean` if anything is left\n", sig)
			}
			if cfg.force != nil {
				_ = cfg.force.Run(cfg.forceTimeout)
			}
			cfg.exit(130)
		case <-done:
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel(context.Canceled)
		})
	}
	return ctx, stop
}

// Detached returns a context that keeps ctx's values but not its
// cancellation, bounded by timeout (DefaultCleanupTimeout when <= 0): the
// context teardown needs after the run's own context was cancelled.
func Detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = DefaultCleanupTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// Stack is a LIFO of cleanups. It is safe for concurrent use; each cleanup
// runs at most once.
type Stack struct {
	mu    sync.Mutex
	steps []step
}

type step struct {
	name string
	fn   func(ctx context.Context) error
}

// Push adds a cleanup; the last pushed runs first.
func (s *Stack) Push(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, step{name, fn})
}

// Len reports how many cleanups are pending.
func (s *Stack) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Run pops and runs every cleanup, last first, each with a fresh context
// bounded by timeout (so a cancelled run still cleans up). It keeps going
// after a failure and returns all failures joined.
func (s *Stack) Run(timeout time.Duration) error {
	var errs []error
	for {
		s.mu.Lock()
		if len(s.steps) == 0 {
			s.mu.Unlock()
			break
		}
		st := s.steps[len(s.steps)-1]
		s.steps = s.steps[:len(s.steps)-1]
		s.mu.Unlock()
		ctx, cancel := Detached(context.Background(), timeout)
		if err := st.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", st.name, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}
