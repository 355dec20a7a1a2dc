package load

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
)

// Error kinds recorded in results.Operation.Errors.
const (
	KindTimeout    = "timeout"           // no answer within the request timeout
	KindRefused    = "refused"           // connection refused (nothing listens)
	KindReset      = "reset"             // connection reset or broken pipe
	KindEOF        = "eof"               // server closed the connection mid-request
	KindHTTP4xx    = "http_4xx"          // a 4xx status the step did not expect
	KindHTTP5xx    = "http_5xx"          // a 5xx status
	KindStatus     = "unexpected_status" // a non-error status other than the expected one
	KindExtract    = "extract"           // a variable the step extracts was not in the body
	KindProtocol   = "protocol"          // the server answered something the protocol does not allow
	KindServer     = "server_error"      // memcached SERVER_ERROR / CLIENT_ERROR / ERROR
	KindNotStarted = "not_started"       // due in the window, but the generator could not start it
	KindOther      = "other"
	// kindCanceled marks requests cut off because the run ended (Ctrl-C or the
	// drain limit); they are not recorded as the server's fault.
	kindCanceled = "canceled"
)

// classify maps a transport error to its kind.
func classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return kindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return KindReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return KindEOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		return pe.kind
	}
	return KindOther
}

// statusKind is the error kind of an HTTP status given the expected one
// (0: any status < 400 is fine).
func statusKind(status, expect int) string {
	if expect != 0 && status == expect {
		return ""
	}
	switch {
	case status >= 500:
		return KindHTTP5xx
	case status >= 400:
		return KindHTTP4xx
	case expect != 0:
		return KindStatus
	}
	return ""
}

// protocolError is an answer that breaks the protocol or reports a server-side error.
type protocolError struct {
	kind string
	msg  string
}

func (e *protocolError) Error() string { return e.kind + ": " + e.msg }

func quote(b []byte) string {
	if len(b) > 80 {
		b = b[:80]
	}
	return strconv.Quote(string(b))
}
