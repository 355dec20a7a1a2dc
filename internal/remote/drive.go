package remote

import (
	"context"
	"encoding/json"
	"fmt"

	"ctrperf/internal/agent"
	"ctrperf/internal/results"
)

// Drive runs a workload's driver on the client's host (the load host):
// latencies and durations are measured there, on its monotonic clock, and
// come back as the measurement with its histograms. started hears when the
// measured window began (on the host's wall clock), progress each step.
func (c *Client) Drive(ctx context.Context, p agent.DriveParams, started func(unixNano int64), progress func(string)) (*results.Measurement, error) {
	var m results.Measurement
	err := c.Call(ctx, agent.MethodDrive, p, &m, func(ev string, data json.RawMessage) {
		switch ev {
		case agent.EventStarted:
			var s agent.Started
			if agent.Decode(data, &s) == nil && started != nil {
				started(s.UnixNano)
			}
		case agent.EventProgress:
			var msg string
			if agent.Decode(data, &msg) == nil && progress != nil {
				progress(msg)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("load generator on %s: %w", c.Name, err)
	}
	return &m, nil
}

// Clean runs `ctrperf clean` on the client's host.
func (c *Client) Clean(ctx context.Context, p agent.CleanParams) (agent.CleanResult, error) {
	var r agent.CleanResult
	err := c.Call(ctx, agent.MethodClean, p, &r, nil)
	return r, err
}
