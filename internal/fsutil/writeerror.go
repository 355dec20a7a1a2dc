package fsutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// WriteError is a failed write of a file, said in words a user acts on: the
// file it was meant for (not a temporary name), the step that failed and the
// errno, e.g. "out of space writing out/x/results.jsonl: append: no space
// left on device (ENOSPC)"; any other failure reads "OP PATH: ERR".
type WriteError struct {
	Path string // the file being written
	Op   string // the step: open, append, write, sync, truncate, replace, ...
	Err  error  // the cause, usually a syscall.Errno
}

func (e *WriteError) Error() string {
	if kind := DiskFault(e.Err); kind != "" {
		return fmt.Sprintf("%s writing %s: %s: %v%s", kind, e.Path, e.Op, e.Err, errnoName(e.Err))
	}
	return fmt.Sprintf("%s %s: %v%s", e.Op, e.Path, e.Err, errnoName(e.Err))
}

func (e *WriteError) Unwrap() error { return e.Err }

// NewWriteError explains err, a failure of step op while writing path. The
// path and step of an *os.PathError or *os.LinkError inside err are dropped
// in favour of path and op: they name a temporary file at best. nil stays
// nil and a *WriteError is returned as it is.
func NewWriteError(path, op string, err error) error {
	if err == nil {
		return nil
	}
	var we *WriteError
	if errors.As(err, &we) {
		return err
	}
	return &WriteError{Path: path, Op: op, Err: cause(err)}
}

// Explain turns an error that carries an *os.PathError (as os.OpenFile,
// (*os.File).Write and Sync return) into a *WriteError naming that path and
// step; any other error is returned unchanged.
func Explain(err error) error {
	var we *WriteError
	if err == nil || errors.As(err, &we) {
		return err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &WriteError{Path: pe.Path, Op: pe.Op, Err: cause(pe.Err)}
	}
	return err
}

// DiskFault names what a write error means for the disk behind it: "out of
// space" (ENOSPC, EDQUOT), "read-only file system" (EROFS), "I/O error"
// (EIO); "" for anything else. Retrying does not help with any of them.
func DiskFault(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "out of space"
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	case errors.Is(err, syscall.EIO):
		return "I/O error"
	}
	return ""
}

// cause strips the wrappers of os that repeat a path.
func cause(err error) error {
	var pe *os.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &se):
		return se.Err
	}
	return err
}

func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return " (" + n + ")"
		}
	}
	return ""
}
