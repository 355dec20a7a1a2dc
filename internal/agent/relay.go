package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"ctrperf/internal/engine"
)

// relay accepts on the host's address that the load host reaches and
// copies each connection to an endpoint that only this host can dial (a
// service listening on loopback, a container IP on a bridge). It is a
// userland proxy like docker-proxy: every configuration of a two-host plan
// goes through one alike, and the deploy result lists it.
type relay struct {
	service, to string
	ln          net.Listener
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       map[net.Conn]bool
	closed      bool
}

// relayEndpoints relays every endpoint of t on host expose (a port of the
// kernel's choosing each) and returns the endpoints as the load host dials
// them.
func relayEndpoints(ctx context.Context, expose string, t *engine.Target) ([]engine.Endpoint, []*relay, error) {
	var eps []engine.Endpoint
	var relays []*relay
	for _, ep := range t.Endpoints {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(expose, "0"))
		if err != nil {
			for _, r := range relays {
				r.close()
			}
			return nil, nil, err
		}
		r := &relay{service: ep.Service, to: ep.Addr, ln: ln, conns: map[net.Conn]bool{}}
		r.wg.Add(1)
		go r.serve(t.Dialer())
		relays = append(relays, r)
		eps = append(eps, engine.Endpoint{Service: ep.Service, Port: ep.Port, Addr: ln.Addr().String()})
	}
	return eps, relays, nil
}

func (r *relay) serve(dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c, true) {
			c.Close()
			return
		}
		go func() {
			defer r.track(c, false)
			defer c.Close()
			up, err := dial(context.Background(), "tcp", r.to)
			if err != nil {
				return
			}
			if !r.track(up, true) {
				up.Close()
				return
			}
			defer r.track(up, false)
			defer up.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			<-done
			<-done
		}()
	}
}

// track adds (or removes) a connection; false once the relay is closed.
func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !add {
		delete(r.conns, c)
		return true
	}
	if r.closed {
		return false
	}
	r.conns[c] = true
	return true
}

// close stops accepting and cuts the relayed connections.
func (r *relay) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

// String names the relay for notes and logs.
func (r *relay) String() string { return fmt.Sprintf("%s → %s (%s)", r.ln.Addr(), r.to, r.service) }
