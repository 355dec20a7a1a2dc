// Package lifecycle makes a run stoppable without leaks: a context that is
// cancelled by SIGINT, SIGTERM or SIGHUP, and a teardown stack whose
// cleanups still run (each with a fresh deadline) after that context is gone.
//
// The first signal asks the run to stop: the context is cancelled, the code
// unwinds and its deferred teardowns run. SIGTERM (kill, systemd, docker
// stop) and SIGHUP (the terminal was closed) mean the same as Ctrl-C: a
// closed terminal must not leave a run half torn down. A second signal means
// the user is not willing to wait: the force cleanups run, each bounded by a
// short deadline, and only then does the process exit with status 130;
// further signals do not cut them short.
//
// While the context lives, SIGPIPE is caught: a write to a closed pipe on
// stdout or stderr (a `| tee` that died with the terminal) returns EPIPE
// instead of killing the process in the middle of its teardown. Messages
// are best-effort: a failed write (EIO once the terminal is gone) is
// ignored.
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
	// notify and stopNotify subscribe a channel to signals (signal.Notify
	// and signal.Stop; tests inject signals without sending them).
	notify     func(c chan<- os.Signal, sig ...os.Signal)
	stopNotify func(c chan<- os.Signal)
}

// StopSignals are the signals that stop a run: Ctrl-C, kill and a closed
// terminal.
var StopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// WithForceCleanup runs s (LIFO, each step bounded by timeout) when a second
// signal arrives, before the process exits.
func WithForceCleanup(s *Stack, timeout time.Duration) Option {
	return func(c *signalConfig) { c.force, c.forceTimeout = s, timeout }
}

// withExit replaces os.Exit (tests).
func withExit(exit func(int)) Option { return func(c *signalConfig) { c.exit = exit } }

// WithMessages sends the "stopping…" notices to w instead of stderr (nil: silent).
func WithMessages(w io.Writer) Option { return func(c *signalConfig) { c.stderr = w } }

// withNotify replaces signal.Notify and signal.Stop (tests).
func withNotify(notify func(chan<- os.Signal, ...os.Signal), stop func(chan<- os.Signal)) Option {
	return func(c *signalConfig) { c.notify, c.stopNotify = notify, stop }
}

// SignalContext returns a context cancelled on the first of StopSignals
// (SIGINT, SIGTERM, SIGHUP), its cause naming the signal. A second signal
// runs the force cleanups (if any) to their end and exits with 130. stop
// releases the signal handlers; call it when the run is over. If a second
// signal's force cleanups are under way, stop waits for them (and the exit).
func SignalContext(parent context.Context, opts ...Option) (context.Context, func()) {
	cfg := signalConfig{
		forceTimeout: 10 * time.Second,
		exit:         os.Exit,
		stderr:       os.Stderr,
		signals:      StopSignals,
		notify:       signal.Notify,
		stopNotify:   signal.Stop,
	}
	for _, o := range opts {
		o(&cfg)
	}
	say := func(format string, args ...any) {
		if cfg.stderr != nil {
			_, _ = fmt.Fprintf(cfg.stderr, format, args...) // the terminal may be gone
		}
	}
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	cfg.notify(ch, cfg.signals...)
	// Caught, never read: the write to a closed pipe fails with EPIPE
	// instead of the runtime killing the process.
	pipe := make(chan os.Signal, 1)
	cfg.notify(pipe, syscall.SIGPIPE)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case sig := <-ch:
			say("ctrperf: %v: stopping and cleaning up (send it again to exit now)\n", sig)
			cancel(fmt.Errorf("received %v", sig))
		case <-done:
			return
		}
		select {
		case sig := <-ch:
			// Signals after this one queue in ch or are dropped: nothing
			// interrupts the force cleanups.
			say("ctrperf: %v again: forcing the teardown, then exiting; run `ctrperf clean` if anything is left\n", sig)
			if cfg.force != nil {
				if err := cfg.force.Run(cfg.forceTimeout); err != nil {
					say("ctrperf: %v\n", err)
				}
			}
			cfg.exit(130)
		case <-done:
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cfg.stopNotify(ch)
			cfg.stopNotify(pipe)
			close(done)
			cancel(context.Canceled)
			<-finished
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
