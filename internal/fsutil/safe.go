package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ctrperf runs as root. A directory it writes into must be one that nobody
// else can change under it: otherwise any local user who can write there
// plants a symlink (OUT/results.jsonl -> /etc/cron.d/x) or a file of their
// own (OUT/plan.yaml, whose host_command root runs), and root follows it.
// The helpers below refuse such paths before anything is read or written.

// UnsafePathError is a path refused because someone other than root or the
// invoking user could change it or what it points to.
type UnsafePathError struct {
	Path string
	Why  string // "it is a symbolic link", "owned by uid 1000", ...
}

func (e *UnsafePathError) Error() string {
	return fmt.Sprintf("refusing %s: %s", e.Path, e.Why)
}

// TrustedUIDs are the owners whose directories and files this process may
// write into: root, the process's own users and, under sudo, the user who
// ran it (SUDO_UID; whoever can set root's environment is root already).
func TrustedUIDs() []uint32 {
	ids := []uint32{0, uint32(os.Geteuid()), uint32(os.Getuid())}
	if s := os.Getenv("SUDO_UID"); s != "" && os.Geteuid() == 0 {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			ids = append(ids, uint32(n))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func trusted(uid uint32) bool { return slices.Contains(TrustedUIDs(), uid) }

func ownerWhy(uid uint32) string {
	return fmt.Sprintf("owned by uid %d, not by root or the invoking user", uid)
}

// CheckDir checks that dir is a directory that only root or the invoking
// user can change: every directory on the way to it (symbolic links on the
// way resolved, each link owned by them) is owned by them and not writable
// by others unless sticky; dir itself is no symbolic link, is owned by them
// and is not group- or world-writable unless sticky. Errors are
// *UnsafePathError or the *os.PathError of the step that failed.
func CheckDir(dir string) error { return walkDir(dir, false, false) }

// CheckDirFollow is CheckDir that accepts dir being a symbolic link as
// long as the link is as safe as those on the way (owned by root or the
// invoking user, in a directory only they can change), for a directory
// given to read from (ctrperf report OUT) that a file is then written to.
func CheckDirFollow(dir string) error { return walkDir(dir, false, true) }

// MakeDir is CheckDir that first creates what is missing of dir, 0755,
// with mkdir (which never follows a symbolic link): a directory someone
// else created first in a shared directory like /tmp is refused, not used.
func MakeDir(dir string) error { return walkDir(dir, true, false) }

// walkDir resolves dir one component at a time from /, as the kernel
// would, checking each directory before looking inside it.
func walkDir(dir string, create, followLast bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cur := "/"
	if err := checkAncestor(cur); err != nil {
		return err
	}
	todo := strings.Split(abs, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		last := len(todo) == 0
		switch c {
		case "", ".":
			if last {
				// A link's target ending in "/" or "/.": cur is dir.
				return checkLeafDir(dir, cur)
			}
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, os.ErrNotExist) && create {
			if err := mkdirExact(next); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			fi, err = os.Lstat(next)
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if last && !followLast {
				return &UnsafePathError{Path: dir, Why: "it is a symbolic link (to a directory anyone able to change the link chooses)"}
			}
			if uid := owner(fi); !trusted(uid) {
				return &UnsafePathError{Path: next, Why: "a symbolic link " + ownerWhy(uid)}
			}
			if links++; links > 40 {
				return &os.PathError{Op: "resolve", Path: dir, Err: syscall.ELOOP}
			}
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if !fi.IsDir() {
			return &os.PathError{Op: "open", Path: next, Err: syscall.ENOTDIR}
		}
		cur = next
		if last {
			return checkLeafDir(dir, cur)
		}
		if err := checkAncestor(cur); err != nil {
			return err
		}
	}
	// Only "/" and paths like "a/.." that resolve to a checked ancestor
	// end here.
	return checkLeafDir(dir, cur)
}

// checkAncestor: a directory on the way may be shared (sticky /tmp),
// because what we use inside it is checked to be ours.
func checkAncestor(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if uid := owner(fi); !trusted(uid) {
		return &UnsafePathError{Path: path, Why: ownerWhy(uid)}
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return &UnsafePathError{Path: path, Why: fmt.Sprintf("mode %v: others can replace what is in it (not sticky)", fi.Mode().Perm())}
	}
	return nil
}

// checkLeafDir checks the directory itself (real path real, named dir).
func checkLeafDir(dir, real string) error {
	fi, err := os.Lstat(real)
	if err != nil {
		return err
	}
	if uid := owner(fi); !trusted(uid) {
		return &UnsafePathError{Path: dir, Why: ownerWhy(uid)}
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return &UnsafePathError{Path: dir, Why: fmt.Sprintf("mode %v: group- or world-writable", fi.Mode().Perm())}
	}
	return nil
}

// mkdirExact makes path 0755 whatever the umask, through a descriptor
// opened without following a link, so the mode goes to what mkdir made.
func mkdirExact(path string) error {
	if err := unix.Mkdir(path, 0o755); err != nil {
		return &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}

func owner(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// OpenTrusted is os.OpenFile for a file in a directory CheckDir accepted:
// it never follows a symbolic link at path (O_NOFOLLOW), and refuses what
// it opened unless it is a regular file owned by root or the invoking user
// and not group- or world-writable; a file opened for writing must also
// have no other hard link (one to /etc/shadow is owned by root too). With
// O_CREATE|O_EXCL a new file is guaranteed. Errors are *UnsafePathError or
// *os.PathError.
func OpenTrusted(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &UnsafePathError{Path: path, Why: "it is a symbolic link"}
	}
	if err != nil {
		return nil, err
	}
	if err := checkOpened(f, flag&(os.O_WRONLY|os.O_RDWR) != 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkOpened(f *os.File, writing bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return checkFile(f.Name(), fi, writing)
}

// checkFile is what OpenTrusted and CheckEntries require of a file.
func checkFile(path string, fi os.FileInfo, writing bool) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return &UnsafePathError{Path: path, Why: "it is a symbolic link"}
	case !fi.Mode().IsRegular():
		return &UnsafePathError{Path: path, Why: fmt.Sprintf("not a regular file (%v)", fi.Mode().Type())}
	case !trusted(owner(fi)):
		return &UnsafePathError{Path: path, Why: ownerWhy(owner(fi))}
	case fi.Mode().Perm()&0o022 != 0:
		return &UnsafePathError{Path: path, Why: fmt.Sprintf("mode %v: group- or world-writable", fi.Mode().Perm())}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && writing && st.Nlink > 1 {
		return &UnsafePathError{Path: path, Why: fmt.Sprintf("it has %d hard links (writing it would write the others)", st.Nlink)}
	}
	return nil
}

// ReadTrusted reads a file with OpenTrusted's checks.
func ReadTrusted(path string) ([]byte, error) {
	f, err := OpenTrusted(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CheckEntries refuses the first entry of dir (not recursing) that is a
// symbolic link, is not owned by root or the invoking user, or is group-
// or world-writable (unless a sticky directory): what root is about to
// read or rewrite in dir must be its own or the invoking user's.
func CheckEntries(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			err = checkLeafDir(p, p)
		} else {
			err = checkFile(p, fi, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DirLock is an exclusive flock on a lock file, held until Close.
type DirLock struct{ f *os.File }

// LockedError is a lock another process holds; PID is 0 when the holder
// did not say.
type LockedError struct {
	Path string
	PID  int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is locked by pid %d", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is locked by another process", e.Path)
}

// Lock takes an exclusive lock on path (created 0644 if missing, opened
// with OpenTrusted's checks) without waiting, and writes this process's
// pid into it for the next one to name. The lock lasts until Close or the
// process's end; the file stays (removing a lock file races with the next
// holder).
//
// A lock this process held and closed can still be held for a moment by a
// child another goroutine forked while it was open: the child shares the
// open file (and so the flock) until its exec closes it. A lock whose file
// names this process is therefore asked again for up to selfLockWait.
func Lock(path string) (*DirLock, error) {
	deadline := time.Now().Add(selfLockWait)
	for {
		l, err := tryLock(path)
		var locked *LockedError
		if errors.As(err, &locked) && locked.PID == os.Getpid() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return l, err
	}
}

// selfLockWait bounds how long Lock waits out a lock its own process
// seems to hold (a forked child between fork and exec).
const selfLockWait = time.Second

func tryLock(path string) (*DirLock, error) {
	f, err := OpenTrusted(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return nil, &LockedError{Path: path, PID: pid}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, NewWriteError(path, "truncate", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, NewWriteError(path, "write", err)
	}
	return &DirLock{f: f}, nil
}

// Close releases the lock.
func (l *DirLock) Close() error { return l.f.Close() }
