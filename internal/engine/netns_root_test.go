package engine

import (
	"errors"
	"testing"

	"github.com/vishvananda/netns"

	"ctrperf/internal/testenv"
)

// TestOnOwnThreadRoot: whatever fn does to its thread's network namespace,
// the thread is back in the caller's namespace afterwards (the next call
// finds it there), and fn's value and error come back as they were.
func TestOnOwnThreadRoot(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	fnErr := errors.New("refused")
	tests := []struct {
		desc    string
		fn      func() (netns.NsHandle, error)
		wantErr error
	}{
		{"fn enters a new namespace and returns it", func() (netns.NsHandle, error) { return netns.New() }, nil},
		{"fn enters a new namespace and fails", func() (netns.NsHandle, error) {
			h, err := netns.New()
			if err == nil {
				h.Close()
			}
			return netns.None(), fnErr
		}, fnErr},
		{"fn stays where it is", func() (netns.NsHandle, error) { return netns.Get() }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			inside, err := onOwnThread(tc.fn, func(h netns.NsHandle) { h.Close() })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				defer inside.Close()
			}
			// Many calls, so that a thread left in fn's namespace would be
			// picked up by one of them.
			for i := 0; i < 20; i++ {
				now, err := onOwnThread(func() (netns.NsHandle, error) { return netns.Get() }, func(h netns.NsHandle) { h.Close() })
				if err != nil {
					t.Fatal(err)
				}
				same := now.Equal(host)
				now.Close()
				if !same {
					t.Fatalf("call %d ran in namespace %v, not the host's %v", i, now, host)
				}
			}
		})
	}
}
