package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
)

// A load host reaches a container's own address (network container-ip on
// a SUT elsewhere) the way one does by hand: a route to it through the
// SUT. Each route is a /32 of an endpoint, marked with ctrperf's routing
// protocol number, and recorded in a file named after its run (the run id
// cannot ride on a route), so that teardown and `ctrperf clean` remove
// exactly ctrperf's routes, and clean only those of runs with no live
// owner.

// RouteProto marks ctrperf's routes (`ip route show proto 199`).
const RouteProto = netlink.RouteProtocol(199)

// RunRoute is one route of a run: Dst through Via.
type RunRoute struct {
	Dst netip.Addr `json:"dst"`
	Via netip.Addr `json:"via"`
}

// RouteTable adds and removes a run's routes; its files live in Dir.
type RouteTable struct {
	Dir string
	// add and del are the kernel's (netlink); tests fake them.
	add, del func(RunRoute) error
}

// NewRouteTable is the routes of this host's network namespace, recorded
// under DefaultRunDir/routes.
func NewRouteTable() *RouteTable {
	return &RouteTable{Dir: filepath.Join(DefaultRunDir, "routes"), add: netlinkRoute(netlink.RouteAdd), del: netlinkRoute(netlink.RouteDel)}
}

func netlinkRoute(op func(*netlink.Route) error) func(RunRoute) error {
	return func(r RunRoute) error {
		dst := &net.IPNet{IP: r.Dst.AsSlice(), Mask: net.CIDRMask(r.Dst.BitLen(), r.Dst.BitLen())}
		return op(&netlink.Route{Dst: dst, Gw: r.Via.AsSlice(), Protocol: RouteProto})
	}
}

func (t *RouteTable) path(runID string) string { return filepath.Join(t.Dir, runID+".json") }

func (t *RouteTable) read(runID string) ([]RunRoute, error) {
	b, err := os.ReadFile(t.path(runID))
	if err != nil {
		return nil, err
	}
	var rs []RunRoute
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("route record %s: %w", t.path(runID), err)
	}
	return rs, nil
}

// Add records r for run, then installs it. A destination that already
// has a route here (the host's own, or another run's) is refused: the
// load would not take the path the run asks for.
func (t *RouteTable) Add(runID string, r RunRoute) error {
	if !nameRe.MatchString(runID) {
		return fmt.Errorf("route for run %q: not a run id", runID)
	}
	rs, err := t.read(runID)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(append(rs, r))
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(t.path(runID), b, 0o600); err != nil {
		return fmt.Errorf("route record: %w", err)
	}
	if err := t.add(r); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			err = fmt.Errorf("this host already has a route to %s: remove it, or run the plan where nothing else routes there", r.Dst)
		}
		if len(rs) == 0 {
			_ = os.Remove(t.path(runID))
		} else {
			_ = fsutil.WriteFileAtomic(t.path(runID), mustJSON(rs), 0o600)
		}
		return fmt.Errorf("route %s via %s: %w", r.Dst, r.Via, err)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Remove deletes run's routes and its record (nothing to do: nil).
func (t *RouteTable) Remove(runID string) ([]string, error) {
	return t.remove(runID, false)
}

func (t *RouteTable) remove(runID string, dry bool) ([]string, error) {
	rs, err := t.read(runID)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, r := range rs {
		what := fmt.Sprintf("route %s via %s of run %s", r.Dst, r.Via, runID)
		if !dry {
			if err := t.del(r); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("remove %s: %w", what, err))
				continue
			}
		}
		removed = append(removed, what)
	}
	if !dry && len(errs) == 0 {
		if err := os.Remove(t.path(runID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// clean removes the routes of run (runID "": of every recorded run that
// own does not keep).
func (t *RouteTable) clean(runID string, dry bool, own *Ownership) ([]string, error) {
	var runs []string
	if runID != "" {
		if _, err := os.Stat(t.path(runID)); err != nil {
			return nil, nil // no record, no route: nothing to decide (nor to list)
		}
		runs = []string{runID}
	} else {
		ents, err := os.ReadDir(t.Dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && nameRe.MatchString(id) {
				runs = append(runs, id)
			}
		}
	}
	var removed []string
	var errs []error
	for _, id := range runs {
		if own.Keep("routes of run "+id, id) {
			continue
		}
		r, err := t.remove(id, dry)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// SourceAddr is the address this host sends from, and receives on, when it
// talks to to (`ip route get TO`): the address a peer's packets arrive on.
func SourceAddr(to netip.Addr) (netip.Addr, string, error) {
	rs, err := kernel.NetlinkDump(func() ([]netlink.Route, error) { return netlink.RouteGet(to.AsSlice()) })
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("route to %s: %w", to, err)
	}
	for _, r := range rs {
		src, ok := netip.AddrFromSlice(r.Src)
		if !ok || !src.IsValid() {
			continue
		}
		dev := ""
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			dev = l.Attrs().Name
		}
		return src.Unmap(), dev, nil
	}
	return netip.Addr{}, "", fmt.Errorf("no route to %s gives a source address", to)
}
