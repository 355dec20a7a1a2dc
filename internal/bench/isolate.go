package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/isolate"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// A configuration with `isolate:` runs the isolate controller during each
// of its runs: started after the deployment and before the warm-up,
// stopped, with everything it changed restored, before the teardown
// (always: on failure, on Ctrl-C and in the forced cleanup too). Its
// decisions go into the run's record: how many placement changes, and the
// reaction time from the workload's hot phase to the first change applied
// to a hot container.

// IsolateRequest is what an Isolator needs for one run.
type IsolateRequest struct {
	Engine  engine.Engine
	Runtime engine.Runtime
	RunID   string
	Spec    plan.IsolateSpec
	// StateDir is the controller's lock, checkpoint and status: the
	// machine's (isolate.DefaultStateDir) in a real run, because IRQ
	// affinity is machine-wide and a crashed run's checkpoint must be
	// found by the next start and by a plain `ctrperf isolate restore`.
	StateDir string
	// LogDir keeps the run's decision log (OUT/isolate).
	LogDir string
	Events func(isolate.Event)
	Warn   func(string)
	// Kernel is the machine's kernel the controller reads and writes
	// (Options.Kernel).
	Kernel kernel.FS
}

// IsolateRun is a running controller; Stop restores what it changed and is
// safe to call more than once.
type IsolateRun interface {
	Stop(ctx context.Context) error
}

// Isolator starts the controller of one run.
type Isolator func(ctx context.Context, req IsolateRequest) (IsolateRun, error)

// dockerClient is the Engine API client of a Docker engine.
type dockerClient interface{ Client() client.APIClient }

// Client reaches through the image preparer to the engine's client.
func (p *imagePreparer) Client() client.APIClient {
	if c, ok := p.Engine.(dockerClient); ok {
		return c.Client()
	}
	return nil
}

// DefaultIsolator starts the controller the run's runtime registered
// (RegisterIsolator: kubernetes, a DaemonSet on every node), else the one
// over Docker (DockerIsolator).
func DefaultIsolator(ctx context.Context, req IsolateRequest) (IsolateRun, error) {
	registry.mu.RLock()
	iso := registry.isolators[req.Runtime]
	registry.mu.RUnlock()
	if iso != nil {
		return iso(ctx, req)
	}
	return DockerIsolator(ctx, req)
}

// RegisterIsolator makes iso the controller of runtime rt's runs, from an
// init function beside RegisterRuntime.
func RegisterIsolator(rt engine.Runtime, iso Isolator) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.isolators == nil {
		registry.isolators = map[engine.Runtime]Isolator{}
	}
	if _, dup := registry.isolators[rt]; dup || iso == nil {
		panic(fmt.Sprintf("bench: RegisterIsolator(%q) twice or nil", rt))
	}
	registry.isolators[rt] = iso
}

// IsolateParams are the controller's parameters of a configuration.
func IsolateParams(s plan.IsolateSpec) isolate.Params { return isolateParams(s) }

// DockerIsolator starts the real controller (isolate.Start) on the engine
// of the run, managing only the run's containers that opted in. Its state
// directory is the machine's, so it cannot run beside a `ctrperf isolate
// run`: IRQ affinity is global, and two controllers would fight over it.
func DockerIsolator(ctx context.Context, req IsolateRequest) (IsolateRun, error) {
	dc, ok := req.Engine.(dockerClient)
	if !ok || dc.Client() == nil {
		return nil, fmt.Errorf("engine %T has no Docker client: isolate needs runtime docker", req.Engine)
	}
	p := isolateParams(req.Spec)
	return isolate.Start(ctx, dc.Client(), isolate.Options{
		Params:   p,
		Labels:   []string{engine.LabelRun + "=" + req.RunID},
		StateDir: req.StateDir,
		LogPath:  filepath.Join(req.LogDir, req.RunID+".decisions.jsonl"),
		Events:   req.Events,
		Warn:     req.Warn,
		Kernel:   req.Kernel,
	})
}

// isolateSession is the controller of one run and what the run learns
// from it.
type isolateSession struct {
	run  IsolateRun
	spec plan.IsolateSpec

	mu       sync.Mutex
	events   []isolate.Event
	hotAt    time.Time
	hotNames []string

	stopOnce sync.Once
	stopErr  error
}

func (s *isolateSession) event(e isolate.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

// hotPhase is workload.Env.HotPhase.
func (s *isolateSession) hotPhase(services []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hotAt.IsZero() {
		s.hotAt, s.hotNames = time.Now(), services
	}
}

// stop ends the controller, restoring everything; nil-safe. Only the
// first call stops it: the run's teardown and the force cleanup may race
// (a later call waits for the first), and later calls return its error.
func (s *isolateSession) stop(ctx context.Context) error {
	if s == nil || s.run == nil {
		return nil
	}
	s.stopOnce.Do(func() { s.stopErr = s.run.Stop(ctx) })
	return s.stopErr
}

// record adds the controller's decisions to the measurement: metrics
// isolate_decisions (placement changes applied), isolate_hot_transitions,
// reaction_s (absent when no hot container was moved: a reaction that did
// not happen is no number) and a note per hot transition.
func (s *isolateSession) record(m *results.Measurement, t *engine.Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Metrics == nil {
		m.Metrics = map[string]float64{}
	}
	hot := map[string]bool{}
	for _, svc := range s.hotNames {
		for _, c := range t.Containers {
			if c.Service == svc {
				hot[c.ID] = true
			}
		}
	}
	f := summarizeIsolate(s.events, hot, s.hotAt)
	m.Metrics["isolate_decisions"] = float64(f.decisions)
	m.Metrics["isolate_hot_transitions"] = float64(f.transitions)
	if f.reacted {
		m.Metrics[results.MetricReaction] = f.reaction.Seconds()
	}
	note := fmt.Sprintf("isolate %s: %d placement changes, %d hot/normal transitions", s.spec.Policy(), f.decisions, f.transitions)
	switch {
	case s.hotAt.IsZero():
		note += "; the workload had no hot phase, so no reaction time"
	case !f.reacted:
		note += fmt.Sprintf("; no placement change or demotion of a hot tenant (%s) after the hot phase began: no reaction time", strings.Join(s.hotNames, ", "))
	default:
		note += fmt.Sprintf("; reacted %.2f s after the hot phase began", f.reaction.Seconds())
	}
	if f.errors > 0 {
		note += fmt.Sprintf("; %d controller errors (see the decision log)", f.errors)
	}
	m.Notes = append(m.Notes, note)
	for _, n := range f.notes {
		m.Notes = append(m.Notes, "isolate: "+n)
	}
}

// isolateFacts is what a run's events say about the controller.
type isolateFacts struct {
	decisions, transitions, errors int
	reaction                       time.Duration
	reacted                        bool
	notes                          []string
}

// summarizeIsolate is pure: the events of a run, the hot containers and
// when the hot phase began.
func summarizeIsolate(events []isolate.Event, hot map[string]bool, hotAt time.Time) isolateFacts {
	var f isolateFacts
	evs := append([]isolate.Event(nil), events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	for _, e := range evs {
		switch e.Kind {
		case "cpuset", "demote", "undemote":
			if !e.DryRun {
				f.decisions++
			}
		case "hot", "normal":
			f.transitions++
			at := ""
			if !hotAt.IsZero() {
				at = fmt.Sprintf(" at %+.2f s from the hot phase", e.Time.Sub(hotAt).Seconds())
			}
			f.notes = append(f.notes, fmt.Sprintf("%s turned %s%s (%s)", e.Name, e.Kind, at, e.Reason))
		case "refused":
			f.notes = append(f.notes, "not pinning: "+e.Reason)
		case "error":
			f.errors++
		}
	}
	if !hotAt.IsZero() {
		f.reaction, f.reacted = isolate.ReactionTime(evs, hot, hotAt)
	}
	return f
}

// RestoreDeadIsolate restores the checkpoint a killed controller left in
// stateDir: a bench run's (whose controller keeps its state in the
// machine's isolate.DefaultStateDir) or a `ctrperf isolate run`'s. Only
// values that still hold what the controller wrote are put back (see
// isolate.RestoreCheckpoint); the rest are left alone. A live controller's
// checkpoint is kept. cli is the engine whose containers the controller
// managed (nil: none answers; the checkpoint is then kept when it holds
// containers' values); kfs is the kernel whose IRQs and RPS masks it
// restores. dry only says what would be restored. It returns what it
// restored, "" when there was nothing.
func RestoreDeadIsolate(ctx context.Context, cli client.APIClient, stateDir string, kfs kernel.FS, dry bool) (string, error) {
	path := filepath.Join(stateDir, "checkpoint.json")
	cp, err := isolate.LoadCheckpoint(path)
	if err != nil {
		return "", fmt.Errorf("isolate checkpoint: %w", err)
	}
	if cp == nil || cp.Empty() {
		return "", nil
	}
	lock, err := isolate.Lock(stateDir)
	if err != nil {
		return "", nil // a live controller's: it restores on exit
	}
	_ = lock.Close()
	what := fmt.Sprintf("isolate checkpoint %s of dead pid %d", path, cp.PID)
	if dry {
		return what, nil
	}
	var restored, left int
	ok, err := isolate.RestoreStateDir(ctx, cli, stateDir, kfs, func(e isolate.Event) {
		switch e.Kind {
		case "restore":
			restored++
		case "left_alone":
			left++
		}
	})
	if err != nil || !ok {
		return "", err
	}
	return fmt.Sprintf("%s (%d values put back, %d changed since and left alone)", what, restored, left), nil
}
