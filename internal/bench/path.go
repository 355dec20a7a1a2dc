package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
)

// The real path of a two-host plan. The load host dials what a client on
// another machine would dial, and nothing of ctrperf's sits between them:
//
//   - each host is asked which of its addresses faces the other (`ip route
//     get`): the load host toward the SUT as ssh names it, the SUT toward
//     the load host's answer; the SUT's is where the load host's packets
//     arrive, and the services are served there (engine.Reach);
//   - network host and bare metal listen on that address, a published port
//     is bound there (Docker's DNAT from outside: docker-proxy serves only
//     the SUT's own connections), a container's own address is reached by
//     a route on the load host through the SUT, put for the run and removed
//     after it;
//   - the SUT admits only the load host to the run's endpoints (its engine
//     puts a chain of ctrperf's, engine.Reach), and the record carries the
//     chain's counters;
//   - the load host connects once before the run is measured: a path the
//     SUT's forwarding or firewall refuses makes the configuration not_run
//     with the reason, never relayed.

// netPath is the pair of addresses between a SUT and its load host.
type netPath struct {
	SUTAddr, LoadAddr netip.Addr
}

// pathHost is a host's side of the path: a remote host's agent, or this
// machine when the load is generated here.
type pathHost interface {
	Source(ctx context.Context, to string) (agent.SourceResult, error)
	AddRoute(ctx context.Context, runID string, r engine.RunRoute) error
	RemoveRoutes(ctx context.Context, runID string) error
	DialCheck(ctx context.Context, addr string, timeout time.Duration) error
}

var _ pathHost = (*remote.Client)(nil)

// localPath is this machine as a load host.
type localPath struct{ routes *engine.RouteTable }

func (l localPath) Source(ctx context.Context, to string) (agent.SourceResult, error) {
	addr, err := netip.ParseAddr(to)
	if err != nil {
		as, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip4", to)
		if lerr != nil || len(as) == 0 {
			return agent.SourceResult{}, fmt.Errorf("resolve %s: %v", to, lerr)
		}
		addr = as[0]
	}
	src, dev, err := engine.SourceAddr(addr.Unmap())
	return agent.SourceResult{To: addr.Unmap(), Addr: src, Dev: dev}, err
}

func (l localPath) AddRoute(_ context.Context, runID string, r engine.RunRoute) error {
	return l.routes.Add(runID, r)
}

func (l localPath) RemoveRoutes(_ context.Context, runID string) error {
	_, err := l.routes.Remove(runID)
	return err
}

func (l localPath) DialCheck(ctx context.Context, addr string, timeout time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	return c.Close()
}

// loadSide is the load host's side of the path.
func (e *sutEngine) loadSide(ctx context.Context) (pathHost, error) {
	if e.load.Local() {
		return localPath{routes: engine.NewRouteTable()}, nil
	}
	h, err := e.set.host(ctx, *e.load, results.RoleLoad)
	if err != nil {
		return nil, fmt.Errorf("load host %s: %w", e.load.Raw, err)
	}
	return h.Client, nil
}

// path finds (once per pair of hosts) the addresses the SUT and the load
// host face each other with.
func (e *sutEngine) path(ctx context.Context) (*netPath, error) {
	key := e.dest.Raw + " " + e.load.Raw
	e.set.mu.Lock()
	p := e.set.paths[key]
	e.set.mu.Unlock()
	if p != nil {
		return p, nil
	}
	sut, err := e.set.host(ctx, e.dest, results.RoleSUT)
	if err != nil {
		return nil, err
	}
	load, err := e.loadSide(ctx)
	if err != nil {
		return nil, err
	}
	p, err = findPath(ctx, sut.Resolved.HostName, sut.Client, load)
	if err != nil {
		return nil, fmt.Errorf("the path from load host %s to SUT host %s: %w", e.load.Raw, e.dest.Raw, err)
	}
	e.set.mu.Lock()
	e.set.paths[key] = p
	e.set.mu.Unlock()
	return p, nil
}

// findPath asks the load host which of its addresses talks to sutName (the
// SUT as ssh reaches it), then the SUT which of its own the load host's
// packets arrive on: that one, not the ssh HostName, is what the load
// host dials (a SUT behind a jump host or with several addresses is
// served where the load host really reaches it).
func findPath(ctx context.Context, sutName string, sut, load pathHost) (*netPath, error) {
	toSUT, err := load.Source(ctx, sutName)
	if err != nil {
		return nil, fmt.Errorf("on the load host: %w", err)
	}
	back, err := sut.Source(ctx, toSUT.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("on the SUT: %w", err)
	}
	p := &netPath{SUTAddr: back.Addr, LoadAddr: toSUT.Addr}
	switch {
	case p.SUTAddr.IsLoopback() || p.LoadAddr.IsLoopback():
		return nil, fmt.Errorf("the load host and the SUT reach each other over loopback (%s, %s): they are one host; name it once in hosts: (sut and load alike)", p.LoadAddr, p.SUTAddr)
	case p.SUTAddr != toSUT.To:
		// The load host dials toSUT.To; the SUT answers from
		// p.SUTAddr. Not the same address: a NAT or a second interface
		// between them. Serve where the load host dials only if the SUT
		// owns it.
		if own, err := sut.Source(ctx, toSUT.To.String()); err == nil && own.Addr == toSUT.To {
			p.SUTAddr = toSUT.To
		} else {
			return nil, fmt.Errorf("the load host reaches the SUT at %s, but the SUT's address toward the load host (%s) is %s: a NAT or a route apart between them; ctrperf serves only on an address of the SUT's own that the load host dials directly (name the SUT by that address in hosts:)", toSUT.To, p.LoadAddr, p.SUTAddr)
		}
	}
	return p, nil
}

// runPath is what a run's path put in place and dialled.
type runPath struct {
	path   *netPath
	via    string
	dial   []string
	routes []string
}

// deployReached deploys spec on the SUT for a load host elsewhere, routes
// the load host to a container's own address, and checks that the load
// host gets in; a path the SUT refuses is not runnable.
func (e *sutEngine) deployReached(ctx context.Context, eng *remote.Engine, spec engine.DeploySpec) (*engine.Target, error) {
	p, err := e.path(ctx)
	if err != nil {
		return nil, notRunnable(err.Error())
	}
	spec.Reach = &engine.Reach{Addr: p.SUTAddr, From: p.LoadAddr}
	t, err := eng.Deploy(ctx, spec)
	if err != nil {
		return t, err
	}
	rp := &runPath{path: p, via: pathVia(spec.Network)}
	e.mu.Lock()
	if e.paths == nil {
		e.paths = map[string]*runPath{}
	}
	e.paths[spec.RunID] = rp
	e.mu.Unlock()
	load, err := e.loadSide(ctx)
	if err != nil {
		return t, err
	}
	for _, ep := range t.Endpoints {
		rp.dial = append(rp.dial, ep.Addr)
		if spec.Network != engine.NetworkContainerIP {
			continue
		}
		ap, err := netip.ParseAddrPort(ep.Addr)
		if err != nil {
			return t, fmt.Errorf("endpoint %s: %w", ep.Addr, err)
		}
		r := engine.RunRoute{Dst: ap.Addr(), Via: p.SUTAddr}
		if slices.Contains(rp.routes, routeString(r)) {
			continue
		}
		if err := load.AddRoute(ctx, spec.RunID, r); err != nil {
			return t, notRunnable(fmt.Sprintf("route the load host %s to the container's address %s through the SUT (%s): %v", e.load.Raw, ap.Addr(), p.SUTAddr, err))
		}
		rp.routes = append(rp.routes, routeString(r))
	}
	for _, addr := range rp.dial {
		if err := load.DialCheck(ctx, addr, 5*time.Second); err != nil {
			why := "the SUT's forwarding or firewall refuses it"
			if spec.Network == engine.NetworkContainerIP {
				why = "the SUT does not forward the load host's packets to its containers (net.ipv4.ip_forward, a FORWARD policy, rp_filter) or the load host has no path to the SUT"
			}
			return t, notRunnable(fmt.Sprintf("the load host %s cannot connect to %s (%s): %v; ctrperf does not relay: run the load on the SUT, or open that path", e.load.Raw, addr, why, err))
		}
	}
	return t, nil
}

func routeString(r engine.RunRoute) string { return fmt.Sprintf("%s/32 via %s", r.Dst, r.Via) }

// PathVia says what carries a load host's packets on a SUT elsewhere in
// network mode n (bench validate prints it per configuration).
func PathVia(n engine.NetworkMode) string { return pathVia(n) }

// pathVia says what carries the load host's packets on the SUT.
func pathVia(n engine.NetworkMode) string {
	switch n {
	case engine.NetworkPublished, engine.NetworkPublishedExternal:
		return "a published port bound to the SUT's address: Docker's DNAT (docker-proxy serves only the SUT's own connections, so it is not on this path)"
	case engine.NetworkContainerIP:
		return "the container's own address, through a route on the load host via the SUT (the SUT forwards to its bridge)"
	default:
		return "the SUT's own address (the process listens there)"
	}
}

// removeRoutes removes the routes a run put on the load host.
func (e *sutEngine) removeRoutes(ctx context.Context, runID string) error {
	if e.load == nil {
		return nil
	}
	e.mu.Lock()
	rp := e.paths[runID]
	delete(e.paths, runID)
	e.mu.Unlock()
	if rp == nil || len(rp.routes) == 0 {
		return nil
	}
	ctx, cancel := lifecycle.Detached(ctx, 30*time.Second)
	defer cancel()
	load, err := e.loadSide(ctx)
	if err != nil {
		return fmt.Errorf("routes of run %s on load host %s: %w (its agent removes them when the session ends; `ctrperf clean --hosts` after a kill)", runID, e.load.Raw, err)
	}
	if err := load.RemoveRoutes(ctx, runID); err != nil {
		return fmt.Errorf("routes of run %s on load host %s: %w", runID, e.load.Raw, err)
	}
	return nil
}

// recordPath puts the run's path and the SUT's admit counters in m.
func (e *sutEngine) recordPath(ctx context.Context, t *engine.Target, m *results.Measurement) {
	if e.load == nil {
		return
	}
	e.mu.Lock()
	rp := e.paths[t.RunID]
	e.mu.Unlock()
	if rp == nil {
		return
	}
	np := &results.NetPath{Kind: results.PathDirect, Via: rp.via, SUTAddr: rp.path.SUTAddr.String(), LoadAddr: rp.path.LoadAddr.String(),
		Dialled: rp.dial, Routes: rp.routes}
	if h := e.set.current(e.dest); h != nil {
		c, err := h.Client.AdmitCounts(ctx, t.RunID)
		if err != nil {
			np.CountError = err.Error()
		} else {
			np.AdmitChain, np.AdmittedPackets, np.RefusedPackets = c.Chain, c.AdmittedPackets, c.RefusedPackets
		}
	} else {
		np.CountError = errors.New("the SUT's session dropped").Error()
	}
	m.Path = np
	// One note for every run alike (ports and container addresses differ
	// run by run; the record's path has them, with the counters).
	m.Notes = append(m.Notes, fmt.Sprintf("path: the load host (%s) dials the SUT (%s) directly, via %s; no process of ctrperf's between them; only the load host is admitted (the record's path counts what the SUT admitted and refused)",
		np.LoadAddr, np.SUTAddr, np.Via))
	if np.RefusedPackets > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("the SUT refused packets of other sources to the run's endpoints during the run (chain %s)", np.AdmitChain))
	}
}
