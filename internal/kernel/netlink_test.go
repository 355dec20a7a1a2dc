package kernel

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestNetlinkDumpRetriesInterrupted(t *testing.T) {
	calls := 0
	got, err := NetlinkDump(func() ([]string, error) {
		calls++
		if calls < 3 {
			return []string{"partial"}, netlink.ErrDumpInterrupted
		}
		return []string{"a", "b"}, nil
	})
	if err != nil || len(got) != 2 || calls != 3 {
		t.Fatalf("got %v, %v after %d calls; want [a b], nil after 3", got, err, calls)
	}
}

func TestNetlinkDumpGivesUp(t *testing.T) {
	calls := 0
	got, err := NetlinkDump(func() ([]int, error) {
		calls++
		return []int{1}, netlink.ErrDumpInterrupted
	})
	if !errors.Is(err, netlink.ErrDumpInterrupted) || got != nil || calls != dumpAttempts {
		t.Fatalf("got %v, %v after %d calls; want nil and the interrupted error after %d", got, err, calls, dumpAttempts)
	}
}

func TestNetlinkDumpPassesOtherErrors(t *testing.T) {
	other := errors.New("permission denied")
	calls := 0
	_, err := NetlinkDump(func() ([]int, error) { calls++; return nil, other })
	if !errors.Is(err, other) || calls != 1 {
		t.Fatalf("err %v after %d calls; want the error at once", err, calls)
	}
}
