package bench

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
)

// fakePathHost answers `ip route get` from a table: destination → source.
type fakePathHost struct {
	names map[string]string // name → address, as the host resolves it
	src   map[string]string // destination → this host's source address
}

func (f fakePathHost) Source(_ context.Context, to string) (agent.SourceResult, error) {
	if a, ok := f.names[to]; ok {
		to = a
	}
	src, ok := f.src[to]
	if !ok {
		return agent.SourceResult{}, errors.New("no route to " + to)
	}
	return agent.SourceResult{To: netip.MustParseAddr(to), Addr: netip.MustParseAddr(src)}, nil
}
func (fakePathHost) AddRoute(context.Context, string, engine.RunRoute) error { return nil }
func (fakePathHost) RemoveRoutes(context.Context, string) error              { return nil }
func (fakePathHost) DialCheck(context.Context, string, time.Duration) error  { return nil }

func TestFindPath(t *testing.T) {
	tests := []struct {
		desc      string
		sutName   string
		sut, load fakePathHost
		sutAddr   string
		loadAddr  string
		errHas    string
	}{
		{"the lab: one bridge", "198.19.200.2",
			fakePathHost{src: map[string]string{"198.19.200.3": "198.19.200.2"}},
			fakePathHost{src: map[string]string{"198.19.200.2": "198.19.200.3"}},
			"198.19.200.2", "198.19.200.3", ""},
		{"a name ssh dials, resolved on the load host", "sut.lan",
			fakePathHost{src: map[string]string{"10.0.0.3": "10.0.0.2"}},
			fakePathHost{names: map[string]string{"sut.lan": "10.0.0.2"}, src: map[string]string{"10.0.0.2": "10.0.0.3"}},
			"10.0.0.2", "10.0.0.3", ""},
		{"a SUT with a second interface toward the load host serves on the address the load host dials", "10.0.0.2",
			fakePathHost{src: map[string]string{"10.0.1.3": "10.0.1.2", "10.0.0.2": "10.0.0.2"}},
			fakePathHost{src: map[string]string{"10.0.0.2": "10.0.1.3"}},
			"10.0.0.2", "10.0.1.3", ""},
		{"a NAT between them: refused with the reason", "203.0.113.9",
			fakePathHost{src: map[string]string{"10.0.0.3": "172.16.0.5", "203.0.113.9": "172.16.0.5"}},
			fakePathHost{src: map[string]string{"203.0.113.9": "10.0.0.3"}},
			"", "", "a NAT or a route apart"},
		{"one host named twice", "127.0.1.1",
			fakePathHost{src: map[string]string{"127.0.0.1": "127.0.0.1"}},
			fakePathHost{src: map[string]string{"127.0.1.1": "127.0.0.1"}},
			"", "", "they are one host"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := findPath(context.Background(), tc.sutName, tc.sut, tc.load)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one with %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.SUTAddr.String() != tc.sutAddr || p.LoadAddr.String() != tc.loadAddr {
				t.Errorf("path %s ← %s, want %s ← %s", p.SUTAddr, p.LoadAddr, tc.sutAddr, tc.loadAddr)
			}
		})
	}
}
