package engine

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestReadyTCPNeedsAConnectionHeldOpen: a TCP ready check passes for a
// service that keeps the connection open (or greets), and not for a
// front that accepts and closes at once, as docker-proxy does for a
// published port before anything listens behind it.
func TestReadyTCPNeedsAConnectionHeldOpen(t *testing.T) {
	serve := func(t *testing.T, handle func(net.Conn)) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go handle(c)
			}
		}()
		return l.Addr().String()
	}
	rows := []struct {
		desc   string
		handle func(net.Conn)
		ready  bool
	}{
		{"holds the connection (Redis, PostgreSQL)", func(c net.Conn) { time.Sleep(time.Second); c.Close() }, true},
		{"greets (MySQL, SMTP)", func(c net.Conn) { c.Write([]byte("hello\n")); time.Sleep(time.Second); c.Close() }, true},
		{"closes at once (docker-proxy without a backend)", func(c net.Conn) { c.Close() }, false},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			addr := serve(t, r.handle)
			err := WaitReady(context.Background(), ReadyCheck{Timeout: 700 * time.Millisecond}, addr, nil, nil)
			if r.ready && err != nil {
				t.Fatalf("not ready: %v", err)
			}
			if !r.ready && (err == nil || !strings.Contains(err.Error(), "closed at once")) {
				t.Fatalf("err = %v, want the far end closing at once", err)
			}
		})
	}
}
