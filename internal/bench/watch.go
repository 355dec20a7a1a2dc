package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"ctrperf/internal/engine"
)

// EngineFault is why a run failed when the engine it ran on stopped
// answering: dockerd died, was killed or restarted, or hung for longer
// than the grace period. The run's record carries its message.
type EngineFault struct {
	Engine string // the engine's name, "default" for the user's
	Phase  string // what the run was doing: deploy, isolate controller, drive
	Err    error  // the failed ping or Docker call
}

func (f *EngineFault) Error() string {
	return fmt.Sprintf("engine %s stopped answering during %s: %v", f.Engine, f.Phase, f.Err)
}

func (f *EngineFault) Unwrap() error { return f.Err }

// engineWatch pings the engine of a run while the run uses it, so that a
// dead engine ends the run at once instead of leaving a driver blocked on
// a dead target until the run's budget: an engine that is gone (its socket
// refuses, the connection breaks) faults the run at the first failed
// ping; one that answers too slowly faults it after grace without an
// answer, since a loaded machine may slow dockerd down without killing
// it. A fault cancels the run's context with the EngineFault as cause.
type engineWatch struct {
	eng    engine.Engine
	name   string
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	phase string
	fault *EngineFault

	// ctx ends with stop, abandoning a ping still waiting.
	ctx  context.Context
	quit context.CancelFunc
	done chan struct{}
}

// watchEngine starts watching eng in phase; stop ends it.
func watchEngine(eng engine.Engine, name, phase string, every, grace time.Duration, cancel context.CancelCauseFunc) *engineWatch {
	w := &engineWatch{eng: eng, name: name, cancel: cancel, phase: phase, done: make(chan struct{})}
	w.ctx, w.quit = context.WithCancel(context.Background())
	go w.loop(every, grace)
	return w
}

func (w *engineWatch) loop(every, grace time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var silentSince time.Time // first failed ping of the current silence
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(w.ctx, max(every, time.Second))
		err := w.eng.Ping(ctx)
		cancel()
		if w.ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			silentSince = time.Time{}
			continue
		case silentSince.IsZero():
			silentSince = time.Now()
		}
		if engine.Unreachable(err) {
			w.trip(err)
			return
		}
		if silent := time.Since(silentSince); silent >= grace {
			w.trip(fmt.Errorf("no answer to pings for %s (grace %s): %w", silent.Round(time.Millisecond), grace, err))
			return
		}
	}
}

// setPhase names what the run does now, for the fault's message.
func (w *engineWatch) setPhase(p string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = p
}

// trip records the fault (the first one wins) and cancels the run.
func (w *engineWatch) trip(err error) *EngineFault {
	w.mu.Lock()
	if w.fault == nil {
		w.fault = &EngineFault{Engine: w.name, Phase: w.phase, Err: err}
	}
	f := w.fault
	w.mu.Unlock()
	w.cancel(f)
	return f
}

// check is asked after a phase failed: the fault the watch found, or,
// when the failure itself looks like a dead engine (a Docker call that
// found no engine) or the engine does not answer now, a new one. nil when
// the engine is fine and the failure is the run's own.
func (w *engineWatch) check(ctx context.Context, failure error) *EngineFault {
	if w == nil {
		return nil
	}
	if f := w.found(); f != nil {
		return f
	}
	if engine.Unreachable(failure) {
		return w.trip(failure)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enginePingTimeout)
	defer cancel()
	if err := w.eng.Ping(pctx); err != nil {
		return w.trip(err)
	}
	return nil
}

// found is the fault the watch has seen, if any.
func (w *engineWatch) found() *EngineFault {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fault
}

// stop ends the watch and waits for its goroutine; safe to repeat.
func (w *engineWatch) stop() {
	if w == nil {
		return
	}
	w.quit()
	<-w.done
}
