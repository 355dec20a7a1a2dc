// Package exitcode is ctrperf's one convention for exit statuses. A command
// returns an error; the error says which status it means by implementing
// Coder. main maps it with Of, in one place.
//
//	0    success
//	1    failure: something did not work (an unreachable target, a broken plan, a failed write, a plan that measured nothing)
//	2    usage: the command line is wrong (unknown command or flag, a bad flag value, wrong arguments)
//	3    a threshold was broken: the measurement worked, but a result is worse than the bound asked for
//	130  interrupted (SIGINT, SIGTERM, SIGHUP) after cleaning up
//
// The package is a leaf (standard library only): any package may return
// an error with its own type that implements ExitCode() int.
package exitcode

import (
	"errors"
	"fmt"
)

// The exit statuses.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	Threshold   = 3
	Interrupted = 130
)

// Coder is implemented by errors that choose the exit status.
type Coder interface {
	error
	ExitCode() int
}

// Of is the exit status err asks for: 0 for nil, the code of the first
// Coder in err's chain, else 1.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return Failure
}

// UsageError is a wrong command line: exit status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return Usage }

// Usagef is a UsageError with a formatted message (%w wraps).
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// AsUsage wraps err (unless nil or already a usage error) as a UsageError.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	var u *UsageError
	if errors.As(err, &u) {
		return err
	}
	return &UsageError{Err: err}
}

// ThresholdError says that a result broke a bound (a --fail-on condition,
// a plan threshold, an open-loop rate shortfall): exit status 3. The
// results were still measured and written.
type ThresholdError struct{ Err error }

func (e *ThresholdError) Error() string { return e.Err.Error() }
func (e *ThresholdError) Unwrap() error { return e.Err }

// ExitCode is 3.
func (e *ThresholdError) ExitCode() int { return Threshold }

// Thresholdf is a ThresholdError with a formatted message (%w wraps).
func Thresholdf(format string, args ...any) error {
	return &ThresholdError{Err: fmt.Errorf(format, args...)}
}

// Error carries any other status, e.g. Interrupted. An empty message
// prints nothing (the command has said everything already).
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is e.Code.
func (e *Error) ExitCode() int { return e.Code }
