package remote

import (
	"context"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
)

// Source is the host's address toward to (an address or a name the host
// resolves): where the peer's packets arrive on it.
func (c *Client) Source(ctx context.Context, to string) (agent.SourceResult, error) {
	var r agent.SourceResult
	err := c.Call(ctx, agent.MethodSource, agent.SourceParams{To: to}, &r, nil)
	return r, err
}

// AddRoute puts a route of run on the host (removed with RemoveRoutes or
// when the session ends).
func (c *Client) AddRoute(ctx context.Context, runID string, r engine.RunRoute) error {
	return c.Call(ctx, agent.MethodRouteAdd, agent.RouteParams{RunID: runID, RunRoute: r}, nil, nil)
}

// RemoveRoutes removes run's routes from the host.
func (c *Client) RemoveRoutes(ctx context.Context, runID string) error {
	return c.Call(ctx, agent.MethodRouteRemove, agent.RunParams{RunID: runID}, nil, nil)
}

// DialCheck connects to addr from the host.
func (c *Client) DialCheck(ctx context.Context, addr string, timeout time.Duration) error {
	return c.Call(ctx, agent.MethodDialCheck, agent.DialParams{Addr: addr, Timeout: timeout}, nil, nil)
}

// AdmitCounts reads run's admit chain on the host.
func (c *Client) AdmitCounts(ctx context.Context, runID string) (engine.AdmitCounts, error) {
	var r engine.AdmitCounts
	err := c.Call(ctx, agent.MethodAdmitCounts, agent.RunParams{RunID: runID}, &r, nil)
	return r, err
}
