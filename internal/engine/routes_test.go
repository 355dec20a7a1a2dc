package engine

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

type fakeRoutes struct {
	have   []RunRoute
	addErr error
}

func (f *fakeRoutes) table(dir string) *RouteTable {
	return &RouteTable{Dir: dir,
		add: func(r RunRoute) error {
			if f.addErr != nil {
				return f.addErr
			}
			if slices.Contains(f.have, r) {
				return syscall.EEXIST
			}
			f.have = append(f.have, r)
			return nil
		},
		del: func(r RunRoute) error {
			i := slices.Index(f.have, r)
			if i < 0 {
				return syscall.ESRCH
			}
			f.have = slices.Delete(f.have, i, i+1)
			return nil
		}}
}

var (
	ctr1 = RunRoute{Dst: netip.MustParseAddr("198.19.202.2"), Via: netip.MustParseAddr("198.19.200.2")}
	ctr2 = RunRoute{Dst: netip.MustParseAddr("198.19.203.2"), Via: netip.MustParseAddr("198.19.200.2")}
)

func TestRoutesAreRecordedAndRemovedByRun(t *testing.T) {
	f := &fakeRoutes{}
	rt := f.table(t.TempDir())
	if err := rt.Add("lab-abc-001", ctr1); err != nil {
		t.Fatal(err)
	}
	if err := rt.Add("lab-old-002", ctr2); err != nil {
		t.Fatal(err)
	}
	// A destination that already has a route: refused, the record unchanged.
	err := rt.Add("lab-abc-003", ctr1)
	if err == nil || !errors.Is(err, syscall.EEXIST) && !containsAll(err.Error(), "already has a route", "198.19.202.2") {
		t.Errorf("second route to one address: %v", err)
	}
	if _, err := os.Stat(rt.path("lab-abc-003")); !os.IsNotExist(err) {
		t.Errorf("a refused route left a record: %v", err)
	}
	// clean: the live run's route stays, the dead one's goes.
	removed, err := rt.clean("", false, NewOwnership(ownersHolding("lab-abc-001"), false))
	if err != nil || len(removed) != 1 || !containsAll(removed[0], "198.19.203.2", "lab-old-002") {
		t.Errorf("clean removed %v, %v", removed, err)
	}
	if !slices.Equal(f.have, []RunRoute{ctr1}) {
		t.Errorf("routes left %v, want only the live run's", f.have)
	}
	if _, err := rt.Remove("lab-abc-001"); err != nil || len(f.have) != 0 {
		t.Errorf("remove: %v, left %v", err, f.have)
	}
	// A route already gone (the netns went with it) is no error.
	if err := rt.Add("lab-abc-004", ctr2); err != nil {
		t.Fatal(err)
	}
	f.have = nil
	if _, err := rt.Remove("lab-abc-004"); err != nil {
		t.Errorf("removing a vanished route: %v", err)
	}
	if ents, _ := os.ReadDir(rt.Dir); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}
}

// A run with no route record is not listed by clean (a dry run of
// `clean --run X` said "orphaned routes of run X" for every run).
func TestRouteCleanOfARunWithoutRoutes(t *testing.T) {
	rt := (&fakeRoutes{}).table(t.TempDir())
	own := NewOwnership(nil, false)
	if removed, err := rt.clean("lab-none-001", true, own); err != nil || len(removed) != 0 || len(own.Found()) != 0 {
		t.Errorf("clean of a run without routes: removed %v, found %v, %v", removed, own.Found(), err)
	}
}

func TestRouteRefusesANameThatIsNoRunID(t *testing.T) {
	rt := (&fakeRoutes{}).table(t.TempDir())
	if err := rt.Add("../etc/x", ctr1); err == nil {
		t.Error("a path as run id was taken")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
