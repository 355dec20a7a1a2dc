package load

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// wire is a VU's connection as its bufio.Reader sees it. It counts the
// bytes received (status line, headers and body: what JMeter reports as the
// response size) and sends the pending request from inside the first read
// of its response.
//
// Why: net.Conn's Read always tries read(2) first and waits for readiness
// only when that finds nothing. Right after a request nothing is there yet,
// so every request cost a read that returned EAGAIN before the goroutine
// parked: one syscall in three, and a sixth of the generator's CPU in
// profiles against nginx. Here the request is written inside
// RawConn.Read's callback, which then reports "not ready" without reading,
// so the goroutine parks at once and reads once when the answer is there:
// write, wait, read, like wrk's event loop. Writing inside the callback
// matters: RawConn.Read clears the descriptor's readiness before it calls
// the callback, so readiness caused by the answer cannot be lost, whereas a
// readiness that arrived between a separate write and that clearing would
// be (and the read would wait for its deadline).
//
// Deadlines and cancellation work as for conn.Read: the wait is the
// runtime poller's, which honours the connection's deadline.
type wire struct {
	conn net.Conn
	raw  syscall.RawConn // nil when conn offers no descriptor: plain Write, then Read
	n    int64
	// pending is the request still to be sent; Read sends it first.
	pending []byte
	// deadline is the request's: the write deadline of a write that may block.
	deadline time.Time

	// State of one sendAndRead, kept here so that its callback is a method
	// value made once per connection instead of a closure per request.
	cb      func(fd uintptr) bool
	p       []byte
	written int
	sent    bool
	rn      int
	werr    error
	rerr    error
}

func newWire(c net.Conn) wire {
	w := wire{conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
	return w
}

// Read sends the pending request, if any, then reads the answer.
func (w *wire) Read(p []byte) (int, error) {
	var (
		n   int
		err error
	)
	switch {
	case len(w.pending) > 0 && w.raw != nil:
		n, err = w.sendAndRead(p)
	case len(w.pending) > 0:
		req := w.pending
		w.pending = nil
		if err = w.write(req); err != nil {
			return 0, err
		}
		n, err = w.conn.Read(p)
	default:
		n, err = w.conn.Read(p)
	}
	w.n += int64(n)
	return n, err
}

// send writes req at once (no read follows).
func (w *wire) send(req []byte) error {
	w.pending = nil
	return w.write(req)
}

// write is a blocking write bounded by the request's deadline.
func (w *wire) write(b []byte) error {
	if err := w.conn.SetWriteDeadline(w.deadline); err != nil {
		return err
	}
	_, err := w.conn.Write(b)
	return err
}

func (w *wire) sendAndRead(p []byte) (int, error) {
	req := w.pending
	w.p, w.written, w.sent, w.rn, w.werr, w.rerr = p, 0, false, 0, nil, nil
	if w.cb == nil {
		w.cb = w.step
	}
	err := w.raw.Read(w.cb)
	w.p = nil
	if w.werr != nil {
		w.pending = nil
		return 0, w.opError("write", w.werr)
	}
	if !w.sent && err == nil {
		// The socket's send buffer filled up (a large body): the rest
		// goes through the ordinary, deadline-aware write.
		w.pending = nil
		if err := w.write(req[w.written:]); err != nil {
			return 0, err
		}
		return w.conn.Read(p)
	}
	w.pending = nil
	if err != nil {
		// The wait ended: deadline, cancellation (a deadline in the past)
		// or a closed connection. Net's own read would say the same.
		return 0, w.opError("read", err)
	}
	if w.rerr != nil {
		return 0, w.opError("read", w.rerr)
	}
	if w.rn == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return w.rn, nil
}

// step is the RawConn.Read callback: first the request, then "not ready"
// so that the goroutine waits for the answer, then one read per readiness.
func (w *wire) step(fd uintptr) bool {
	if !w.sent {
		for w.written < len(w.pending) {
			m, err := syscall.Write(int(fd), w.pending[w.written:])
			if m > 0 {
				w.written += m
			}
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return true // finished by conn.Write
			case err != nil:
				w.werr = err
				return true
			}
		}
		w.sent = true
		return false
	}
	for {
		n, err := syscall.Read(int(fd), w.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false // spurious readiness: wait again
		case err != nil:
			w.rerr = err
			return true
		}
		w.rn = n
		return true
	}
}

// opError wraps a raw syscall error the way net.Conn does, so that the
// error kinds (reset, timeout, ...) classify alike on both paths.
func (w *wire) opError(op string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: "tcp", Source: w.conn.LocalAddr(), Addr: w.conn.RemoteAddr(), Err: err}
}
