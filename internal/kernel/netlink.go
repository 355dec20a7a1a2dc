package kernel

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// dumpAttempts is how many times NetlinkDump asks before it gives up.
const dumpAttempts = 10

// NetlinkDump runs a netlink dump (netlink.LinkList, AddrList, RouteList)
// until the kernel answers it whole. A dump that overlaps a change of the
// set it lists (another run creating or deleting a veth, a container's
// interface coming up) ends with netlink.ErrDumpInterrupted and a partial
// list; taken as it is, a clean missed a run's veth and a subnet pick could
// miss an address in use. The dump is asked again instead, a bounded number
// of times.
func NetlinkDump[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpAttempts {
		var out []T
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, fmt.Errorf("%w %d times in a row", err, dumpAttempts)
}
