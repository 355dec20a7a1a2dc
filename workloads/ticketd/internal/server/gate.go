package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Errors of the gate. Both become 503 for the client.
var (
	ErrQueueTimeout = errors.New("timed out waiting for a free client slot")
	ErrQueueFull    = errors.New("request queue is full")
)

// gate caps concurrent requests like Apache's MaxClients: up to max run, the
// rest wait in a queue, and one that waits longer than timeout is refused.
// Apache left them in the listen backlog until the client gave up; answering
// 503 at the same 60 s makes the failure visible to the load generator in
// the same place without depending on kernel backlog sizes.
type gate struct {
	slots    chan struct{}
	maxQueue int64
	timeout  time.Duration
	waiting  atomic.Int64
}

func newGate(max, maxQueue int, timeout time.Duration) *gate {
	return &gate{slots: make(chan struct{}, max), maxQueue: int64(maxQueue), timeout: timeout}
}

// acquire waits for a slot. It returns how long it waited, and a release
// function when it got one.
func (g *gate) acquire(ctx context.Context) (release func(), waited time.Duration, err error) {
	// Fast path: a free slot, no queueing.
	select {
	case g.slots <- struct{}{}:
		return g.release, 0, nil
	default:
	}
	if n := g.waiting.Add(1); g.maxQueue > 0 && n > g.maxQueue {
		g.waiting.Add(-1)
		return nil, 0, ErrQueueFull
	}
	defer g.waiting.Add(-1)
	t0 := time.Now()
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.release, time.Since(t0), nil
	case <-timer.C:
		return nil, time.Since(t0), ErrQueueTimeout
	case <-ctx.Done():
		return nil, time.Since(t0), ctx.Err()
	}
}

func (g *gate) release() { <-g.slots }

// queued is the number of requests waiting.
func (g *gate) queued() int64 { return g.waiting.Load() }

// busy is the number of requests holding a slot.
func (g *gate) busy() int { return len(g.slots) }

// pool is the worker pool behind the gate (PassengerMaxPoolSize): at most
// size requests do application work at once; the others wait without a
// timeout of their own, holding their client slot, as Passenger's global
// queue did.
type pool struct{ sem chan struct{} }

func newPool(size int) *pool { return &pool{sem: make(chan struct{}, size)} }

func (p *pool) acquire(ctx context.Context) (func(), error) {
	select {
	case p.sem <- struct{}{}:
		return func() { <-p.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pool) busy() int { return len(p.sem) }
