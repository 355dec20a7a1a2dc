package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"ctrperf/internal/engine"
)

// The real path of a two-host plan: no process of ctrperf's between the
// load host and the SUT. The caller asks each host which of its addresses
// faces the other (source), the SUT serves there and admits only the load
// host (engine.Reach, done by the engine at deploy), and a load host that
// must reach a container's own address gets a route through the SUT
// (routeAdd), as one would add by hand.

func (s *session) source(ctx context.Context, p SourceParams) outcome {
	if s.opt.Net == nil {
		return fail(errors.New("this agent does not manage the host's network"))
	}
	to, err := resolveAddr(ctx, p.To)
	if err != nil {
		return fail(err)
	}
	src, dev, err := s.opt.Net.Source(to)
	if err != nil {
		return fail(err)
	}
	return ok(SourceResult{To: to, Addr: src, Dev: dev})
}

// resolveAddr is name's IPv4 address as this host resolves it (an address
// stays itself).
func resolveAddr(ctx context.Context, name string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return a.Unmap(), nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	as, err := net.DefaultResolver.LookupNetIP(rctx, "ip4", name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	if len(as) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve %s: no IPv4 address", name)
	}
	return as[0].Unmap(), nil
}

func (s *session) routeAdd(p RouteParams) error {
	if s.opt.Net == nil {
		return errors.New("this agent does not manage the host's network")
	}
	if p.RunID == "" || !p.Dst.IsValid() || !p.Via.IsValid() {
		return &Error{Code: CodeBadParams, Message: "route.add needs a run id, a destination and a gateway"}
	}
	s.mu.Lock()
	if s.owner != nil {
		if err := s.owner.Add(p.RunID); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("owner record: %w", err)
		}
	}
	s.routes[p.RunID] = true
	s.mu.Unlock()
	return s.opt.Net.AddRoute(p.RunID, p.RunRoute)
}

func (s *session) routeRemove(runID string) error {
	if s.opt.Net == nil {
		return errors.New("this agent does not manage the host's network")
	}
	s.mu.Lock()
	delete(s.routes, runID)
	s.mu.Unlock()
	_, err := s.opt.Net.RemoveRoutes(runID)
	return err
}

func (s *session) admitCounts(ctx context.Context, p RunParams) outcome {
	if s.opt.Net == nil {
		return fail(errors.New("this agent does not manage the host's network"))
	}
	c, err := s.opt.Net.AdmitCounts(ctx, p.RunID)
	if err != nil {
		return fail(err)
	}
	return ok(c)
}

// dialCheck connects to p.Addr from this host and hangs up.
func dialCheck(ctx context.Context, p DialParams) error {
	t := p.Timeout
	if t <= 0 || t > time.Minute {
		t = 5 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(dctx, "tcp", p.Addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", p.Addr, err)
	}
	return c.Close()
}

// HostNet is the real Net of a host: netlink routes and ctrperf's admit
// chains (engine).
type HostNet struct{ Routes *engine.RouteTable }

var _ Net = HostNet{}

func (h HostNet) Source(to netip.Addr) (netip.Addr, string, error) { return engine.SourceAddr(to) }
func (h HostNet) AddRoute(runID string, r engine.RunRoute) error   { return h.Routes.Add(runID, r) }
func (h HostNet) RemoveRoutes(runID string) ([]string, error)      { return h.Routes.Remove(runID) }
func (h HostNet) AdmitCounts(ctx context.Context, runID string) (engine.AdmitCounts, error) {
	return engine.ReadAdmitCounts(ctx, runID)
}
