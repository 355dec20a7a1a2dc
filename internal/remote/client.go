// Package remote is ctrperf's side of a host of a plan's hosts: the client
// of internal/agent's protocol over any stream pair (Client), the SSH
// transport that copies ctrperf to the host once and starts `ctrperf agent`
// there (Dial), and the engine.Engine that deploys on that host through
// its agent (Engine).
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/results"
)

// ErrDisconnected is wrapped by every call that the end of the agent's
// stream cut off (the SSH connection dropped, the agent died).
var ErrDisconnected = errors.New("connection to the agent lost")

// Client speaks to one agent over a stream pair.
type Client struct {
	conn *agent.Conn
	// Name names the host in errors ("lab-sut").
	Name string

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*call
	err     error // why the stream ended, once it did
	done    chan struct{}
	closer  io.Closer

	// Hello is the agent's answer to hello; Clock the offset estimate.
	Hello agent.HelloResult
	Clock results.ClockOffset
}

type call struct {
	res     chan *agent.Message
	onEvent func(event string, data json.RawMessage)
}

// ClientOptions of NewClient.
type ClientOptions struct {
	Name    string
	Session string
	// Heartbeat is how often the client proves it is alive; the agent's
	// watchdog ends the session after three missed (0: 2 s; negative:
	// none, only the end of the stream ends it).
	Heartbeat time.Duration
	// ClockRounds is how many round trips estimate the clock offset
	// (default 8).
	ClockRounds int
	// Closer is closed by Close after the shutdown (the SSH process).
	Closer io.Closer
	// Build, when set, is this ctrperf's binary's sha256 (selfbin.Read):
	// an agent whose binary differs refuses hello with agent.CodeVersion
	// (an agent pod's binary comes from an image, which may be stale), and
	// an agent that answers with another build is refused here.
	Build string
	// Fix is the advice that ends the error of an agent of another
	// version or build ("rebuild images: ctrperf images build").
	Fix string
	// HelloTimeout bounds hello and the clock estimate: an agent that
	// never answers (a stalled remote shell, a pod that never starts
	// its agent) fails the dial instead of hanging it (default 30 s).
	HelloTimeout time.Duration
	// FrameSize is the protocol's frame size (agent.FrameSize when 0;
	// the agent's must be the same). Tests take it small.
	FrameSize int
}

// DefaultHelloTimeout is ClientOptions.HelloTimeout's default.
const DefaultHelloTimeout = 30 * time.Second

// NewClient says hello over r and w, estimates the clock offset and starts
// the heartbeats. The agent's version must be this ctrperf's.
func NewClient(ctx context.Context, r io.Reader, w io.Writer, o ClientOptions) (*Client, error) {
	c := &Client{conn: agent.NewConn(r, w, agent.WithFrameSize(o.FrameSize)), Name: o.Name, pending: map[uint64]*call{}, done: make(chan struct{}), closer: o.Closer}
	if c.Name == "" {
		c.Name = "agent"
	}
	go c.read()
	hb := o.Heartbeat
	if hb == 0 {
		hb = 2 * time.Second
	}
	hp := agent.HelloParams{Version: agent.Version, Session: o.Session, Build: o.Build}
	if hb > 0 {
		hp.Heartbeat = 3 * hb
	}
	budget := o.HelloTimeout
	if budget <= 0 {
		budget = DefaultHelloTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if err := c.hello(hctx, hp, o); err != nil {
		c.abandon()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("%s: the agent did not answer hello within %s (a remote shell that hangs, an agent that never started): %w", c.Name, budget, err)
		}
		return nil, err
	}
	rounds := o.ClockRounds
	if rounds <= 0 {
		rounds = 8
	}
	clk, err := c.EstimateClock(hctx, rounds)
	if err != nil {
		c.abandon()
		return nil, fmt.Errorf("%s: clock: %w", c.Name, err)
	}
	c.Clock = clk
	if hb > 0 {
		go c.heartbeat(hb)
	}
	return c, nil
}

// hello opens the session and checks that the agent is this ctrperf.
func (c *Client) hello(ctx context.Context, hp agent.HelloParams, o ClientOptions) error {
	fix := ""
	if o.Fix != "" {
		fix = ": " + o.Fix
	}
	if err := c.Call(ctx, agent.MethodHello, hp, &c.Hello, nil); err != nil {
		if errors.Is(err, &agent.Error{Code: agent.CodeVersion}) {
			return fmt.Errorf("%s: hello: %w%s", c.Name, err, fix)
		}
		return fmt.Errorf("%s: hello: %w", c.Name, err)
	}
	if c.Hello.Version != agent.Version {
		return fmt.Errorf("%s: the agent speaks protocol %d, this ctrperf %d%s", c.Name, c.Hello.Version, agent.Version, fix)
	}
	if o.Build != "" && c.Hello.Build != o.Build {
		return fmt.Errorf("%s: the agent is ctrperf build %q, this ctrperf %s%s", c.Name, c.Hello.Build, o.Build, fix)
	}
	return nil
}

// abandon ends a session that never opened: no shutdown to ask for (the
// agent may not answer), the transport closed.
func (c *Client) abandon() {
	if c.closer != nil {
		_ = c.closer.Close()
	}
}

// read delivers responses and events to their calls until the stream ends.
func (c *Client) read() {
	for {
		m, err := c.conn.Receive()
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		cl := c.pending[m.ID]
		c.mu.Unlock()
		if cl == nil {
			continue // a session log, or the answer to an abandoned call
		}
		if m.Event != "" {
			if cl.onEvent != nil {
				cl.onEvent(m.Event, m.Data)
			}
			continue
		}
		c.mu.Lock()
		delete(c.pending, m.ID)
		c.mu.Unlock()
		cl.res <- m
	}
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	c.err = fmt.Errorf("%w to %s: %v", ErrDisconnected, c.Name, err)
	close(c.done)
	for id, cl := range c.pending {
		delete(c.pending, id)
		close(cl.res)
	}
}

// Err is why the connection ended, nil while it lives.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Call sends a request and waits for its answer, handing its events to
// onEvent (from the reading goroutine: keep it short). An error of the
// agent is an *agent.Error; a lost connection wraps ErrDisconnected.
func (c *Client) Call(ctx context.Context, method string, params, result any, onEvent func(event string, data json.RawMessage)) error {
	p, err := c.start(method, params, onEvent)
	if err != nil {
		return err
	}
	return p.wait(ctx, result)
}

// sent is a request sent and not yet answered (Client.start).
type sent struct {
	c      *Client
	id     uint64
	cl     *call
	method string
}

// start sends a request without waiting for its answer: requests started
// one after another reach the agent in that order; wait takes the answer.
func (c *Client) start(method string, params any, onEvent func(event string, data json.RawMessage)) (*sent, error) {
	cl := &call{res: make(chan *agent.Message, 1), onEvent: onEvent}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.next++
	id := c.next
	c.pending[id] = cl
	c.mu.Unlock()
	if err := c.conn.Send(&agent.Message{ID: id, Method: method, Params: agent.Encode(params)}); err != nil {
		c.fail(err)
		return nil, c.Err()
	}
	return &sent{c: c, id: id, cl: cl, method: method}, nil
}

// wait waits for the answer of a started request.
func (p *sent) wait(ctx context.Context, result any) error {
	c := p.c
	select {
	case m, ok := <-p.cl.res:
		if !ok {
			return c.Err()
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			if err := agent.Decode(m.Result, result); err != nil {
				return fmt.Errorf("%s: %s: answer: %w", c.Name, p.method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, p.id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

func (c *Client) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			// Not waiting for the answer: it may queue behind a long
			// message the agent is sending (a series of many frames),
			// and the next heartbeat must still leave on time. At most
			// three are in flight.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*every)
				defer cancel()
				_ = c.Call(ctx, agent.MethodHeartbeat, nil, nil, nil)
			}()
		}
	}
}

// EstimateClock makes n clock round trips and keeps the one with the
// least delay (NTP's choice): offset = agent's time − the midpoint of
// this machine's send and receive, known to within half the round trip.
func (c *Client) EstimateClock(ctx context.Context, n int) (results.ClockOffset, error) {
	type sample struct{ offset, rtt time.Duration }
	var ss []sample
	for range n {
		t0 := time.Now()
		var r agent.ClockResult
		if err := c.Call(ctx, agent.MethodClock, nil, &r, nil); err != nil {
			return results.ClockOffset{}, err
		}
		t2 := time.Now()
		rtt := t2.Sub(t0) // monotonic
		mid := t0.Add(rtt / 2)
		ss = append(ss, sample{offset: time.Unix(0, r.UnixNano).Sub(mid.Round(0)), rtt: rtt})
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].rtt < ss[j].rtt })
	best := ss[0]
	return results.ClockOffset{OffsetMs: float64(best.offset) / 1e6, RTTMs: float64(best.rtt) / 1e6, Samples: n}, nil
}

// Close shuts the agent's session down (it tears down what is left) and
// closes the transport.
func (c *Client) Close(ctx context.Context) error {
	if c.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		_ = c.Call(sctx, agent.MethodShutdown, nil, nil, nil)
		cancel()
	}
	if c.closer != nil {
		return c.closer.Close()
	}
	return nil
}
