package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockEngine takes engine name's lock (<run>/engines/<name>.lock), which
// serialises whatever starts, shares or removes that engine across
// processes: a start holds it until the engine answers, and clean holds it
// from re-reading the owners to the end of the engine's teardown, so that
// clean never takes down an engine a run is just starting or sharing.
// A teardown removes the lock file; a waiter that then gets the lock of
// the unlinked file tries again on the new one, so that two holders never
// hold different files of one name.
func lockEngine(o Options, name string) (unlock func(), err error) {
	if err := os.MkdirAll(o.enginesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", o.enginesDir(), err)
	}
	p := filepath.Join(o.enginesDir(), name+".lock")
	for {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open engine lock %s: %w", p, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock engine %s: %w", name, err)
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(p, &now) == nil && held.Dev == now.Dev && held.Ino == now.Ino {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		f.Close() // removed (or replaced) while we waited
	}
}
