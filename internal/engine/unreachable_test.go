package engine

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// What the Docker SDK returns for an engine that is gone is told from one
// that is slow: a missing socket, a refused or a broken connection is
// unreachable; a deadline is not.
func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string, serve func(net.Conn)) string {
		p := filepath.Join(dir, name)
		l, err := net.Listen("unix", p)
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
				go serve(c)
			}
		}()
		return p
	}
	closes := listen("eof.sock", func(c net.Conn) { c.Close() }) // dockerd killed mid-request
	silent := listen("silent.sock", func(c net.Conn) { time.Sleep(5 * time.Second); c.Close() })
	tests := []struct {
		desc   string
		socket string
		want   bool
	}{
		{"socket gone", filepath.Join(dir, "none.sock"), true},
		{"connection closed without an answer", closes, true},
		{"no answer before the deadline", silent, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cli, err := client.New(client.WithHost("unix://"+tt.socket), client.WithAPIVersion("1.41"))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = NewDocker(cli, WithEngineName("x")).Ping(ctx)
			if err == nil {
				t.Fatal("ping answered")
			}
			if got := Unreachable(err); got != tt.want {
				t.Errorf("Unreachable(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
	if Unreachable(nil) || !Unreachable(errors.Join(errors.New("x"), ErrUnreachable)) {
		t.Error("nil or ErrUnreachable misjudged")
	}
}
