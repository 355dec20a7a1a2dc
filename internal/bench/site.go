package bench

import (
	"context"
	"fmt"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// A site is where a configuration runs: the engine its services are
// deployed on, what samples them (on the run's clock), and where its load
// is generated. It is chosen once per configuration (runner.siteOf) from
// the configuration's hosts and its runtime's traits, and a run asks only
// its site, never the engine's type or the runtime's name. There are
// three:
//
//   - thisMachine: the engine of this machine (bare metal, Docker), its
//     samplers, the workload's driver here;
//   - remoteHosts (hosts.go): the engine of an SSH host through its
//     agent, sampled there; the load from the load host's agent, the
//     one-generator case of the remote driver (fanout.go);
//   - cluster (cluster.go): the cluster's engine, opened here, its pods
//     sampled by agents on their nodes; the load from here or from N
//     generator pods (fanout.go).
type site interface {
	// open returns the engine the configuration deploys on, opening it
	// (again, after a fault). A runtimeUnavailable error makes the
	// configuration not_run.
	open(ctx context.Context) (engine.Engine, engine.Info, error)
	// observer samples a run's deployment on eng (opened by open).
	observer(eng engine.Engine, t *engine.Target) Observer
	// driver is the workload as a run drives it here.
	driver(rn *run) workload.Workload
	// hosts names the run's hosts in its record; nil when it has none
	// but this machine.
	hosts() *results.RunHosts
}

// siteOf is cfg's site, made on its first run and kept for the others.
func (r *runner) siteOf(cfg *plan.Configuration) site {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sites[cfg.Name]; s != nil {
		return s
	}
	var s site
	here := thisMachine{r: r, cfg: cfg}
	switch {
	case cfg.Hosts.Remote():
		s = &remoteHosts{r: r, cfg: cfg}
	case cfg.Runtime.Traits().Cluster:
		s = &cluster{thisMachine: here}
	default:
		s = here
	}
	if r.sites == nil {
		r.sites = map[string]site{}
	}
	r.sites[cfg.Name] = s
	return s
}

// thisMachine is the site of a configuration that runs here.
type thisMachine struct {
	r   *runner
	cfg *plan.Configuration
}

func (s thisMachine) open(ctx context.Context) (engine.Engine, engine.Info, error) {
	return s.r.opt.Engines.Engine(ctx, s.cfg.Runtime, s.cfg.Engine)
}

// observer samples this machine, unless the engine's services run on
// another kernel that it reaches itself (engine.ObservedElsewhere: a VM
// guest's own /proc and cgroups), which then samples there.
func (s thisMachine) observer(eng engine.Engine, t *engine.Target) Observer {
	if oe, ok := eng.(engine.ObservedElsewhere); ok {
		return oe.Observer(t)
	}
	return s.r.opt.Observers(t)
}

func (s thisMachine) driver(*run) workload.Workload { return s.r.wl }

func (s thisMachine) hosts() *results.RunHosts { return nil }

// siteUnavailable is a configuration that its site cannot run at all.
func siteUnavailable(format string, args ...any) error {
	return runtimeUnavailable(fmt.Sprintf(format, args...))
}
