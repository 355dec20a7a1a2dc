package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event loops: the closed loop the way wrk runs it.
//
// With one goroutine per VU, every request goes through the Go runtime's
// network poller: the goroutine parks, the poller thread finds the socket
// ready, hands the goroutine to a P, often wakes another thread to run it,
// and a deadline timer moves twice per request. Against a static file on
// loopback that hand-off is what was left between ctrperf and wrk once the
// generator's CPU per request matched wrk's (see the README's load section):
// CPU the generator did not use because its threads were asleep between
// hand-offs.
//
// Here, as in wrk, each loop is one OS thread (runtime.LockOSThread) with an
// epoll instance of its own and a share of the connections; it writes a
// request, waits in epoll_wait, reads and parses whatever answered, records
// it, and writes the next request on the same pass. Nothing is handed
// between threads, and deadlines are a sweep every few milliseconds instead
// of timers.
//
// The loops serve what needs nothing per session: a closed loop of a
// one-step HTTP scenario without think time, extraction or {{variables}},
// dialed with the default dialer (the single-URL `ctrperf load URL
// --concurrency N`; a caller's Dialer may return connections that are not
// sockets, and keeps the goroutine path). Redirects, cookies between a redirect's hops, the retry of a
// request that met a closed keep-alive connection, timeouts, error kinds and
// the recorded bytes behave as in the goroutine path (http.go); tests run
// both on the same servers.

// loopDriver is a Driver that can run a closed loop on event loops.
type loopDriver interface {
	// loopable reports whether the driver's sessions fit the event loops.
	loopable() bool
	// runLoop drives VUs ids on one event loop until c stops every one of
	// them or ctx ends.
	runLoop(ctx context.Context, c *closedLoop, ids []int) error
}

// loops runs the closed loop on one event loop per P, each with its share
// of the VUs. One per P, not more: a loop keeps its P while it waits (see
// epollWait), so a loop without a P of its own would wait for another to
// be preempted.
func (r *runner) loops(ctx context.Context, ld loopDriver) error {
	c := r.startClosed()
	n := min(runtime.GOMAXPROCS(0), r.p.Concurrency)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		var ids []int
		for id := i; id < r.p.Concurrency; id += n {
			ids = append(ids, id)
		}
		go func() { errs <- ld.runLoop(ctx, c, ids) }()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	c.finish()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// loopTally is what one event loop counts for the run, kept apart from the
// other loops' (no lock or cache line shared per request) and added to
// the run's when the loop ends.
type loopTally struct {
	c        *closedLoop
	rec      *recorder
	ok, fail int64
	last     time.Time // end of the last measured session
}

func (c *closedLoop) tally() *loopTally { return &loopTally{c: c, rec: c.r.rec.shard()} }

// complete records a one-step session that the loop ran, as runner.session
// does for a VU's.
func (t *loopTally) complete(label string, start, end time.Time, bytes int64, kind string, measured bool) {
	r := t.c.r
	if r.p.Live != nil {
		r.p.Live.sessions.Add(1)
	}
	if !measured {
		r.p.Live.observe(kind)
		return
	}
	t.rec.Observe(label, end.Sub(start), bytes, kind)
	if kind == "" {
		t.ok++
	} else {
		t.fail++
	}
	t.last = end
}

// flush adds the loop's counts to the run's.
func (t *loopTally) flush() {
	r := t.c.r
	r.rec.merge(t.rec)
	r.sessOK.Add(t.ok)
	r.sessFail.Add(t.fail)
	if !t.last.IsZero() {
		t.c.done(t.last)
	}
}

func (d *HTTPDriver) loopable() bool {
	if d.noLoop || !d.plainDial || len(d.steps) != 1 {
		return false
	}
	st := &d.steps[0]
	return st.Think == 0 && len(st.extract) == 0 && !d.needVars()
}

// sweepEvery is how often a loop looks for requests past their deadline,
// and the longest it sleeps in epoll_wait (it also checks for the end of
// the run then).
const sweepEvery = 10 * time.Millisecond

type evLoop struct {
	d     *HTTPDriver
	c     *closedLoop
	tally *loopTally
	st    *compiledStep
	ctx   context.Context
	epfd  int
	conns []*evConn
	busy  int       // connections in a session
	ready []*evConn // connections whose next session is to begin
	first evRequest // every session's first request
	req0  []byte    // its bytes (no cookies on a first request)
	next  []*evConn // scratch for ready
	errs  []error   // loop failures, reported after the run
	hdr   [1]unix.EpollEvent
}

type evRequest struct {
	method, contentType string
	u                   *url.URL
	body                []byte
}

// evConn is one VU: a connection and the session on it.
type evConn struct {
	idx    int
	fd     int  // -1: no connection
	reused bool // the connection has served a response
	wantWr bool // registered for EPOLLOUT (a request did not fit the socket)

	busy     bool
	measured bool
	start    time.Time
	deadline time.Time
	req      evRequest
	jar      *cookiejar.Jar
	hops     int
	attempt  int
	wasReuse bool  // the connection had served a response when this exchange began
	total    int64 // bytes of the responses of earlier hops
	got      int   // bytes received in this exchange

	out   []byte // the request being written
	wrote int
	owned bytes.Buffer // out's storage when it is not the shared first request
	p     respParser
	buf   []byte
	n     int // unparsed bytes in buf
}

func (d *HTTPDriver) runLoop(ctx context.Context, c *closedLoop, ids []int) error {
	runtime.LockOSThread()
	if !batchThread() {
		defer runtime.UnlockOSThread()
	}
	// Otherwise the goroutine ends still locked, and the runtime ends its
	// thread with it: the scheduling policy never reaches another goroutine.
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("event loop: %w", os.NewSyscallError("epoll_create1", err))
	}
	defer unix.Close(epfd)
	l := &evLoop{d: d, c: c, tally: c.tally(), st: &d.steps[0], ctx: ctx, epfd: epfd}
	defer l.tally.flush()
	method, u, body, ct := d.stepRequest(l.st, nil)
	l.first = evRequest{method: method, u: u, body: body, contentType: ct}
	var b bytes.Buffer
	d.writeRequest(&b, method, u, body, ct, l.st, nil, nil)
	l.req0 = b.Bytes()
	for i := range ids {
		ec := &evConn{idx: i, fd: -1, buf: make([]byte, maxHeadBytes)}
		l.conns = append(l.conns, ec)
		l.ready = append(l.ready, ec)
	}
	defer l.closeAll()
	events := make([]unix.EpollEvent, len(l.conns))
	lastSweep := time.Now()
	for {
		l.beginReady()
		if l.busy == 0 && len(l.ready) == 0 {
			return errors.Join(l.errs...)
		}
		if ctx.Err() != nil {
			l.cancelAll()
			return errors.Join(l.errs...)
		}
		wait := int(sweepEvery / time.Millisecond)
		if len(l.ready) > 0 {
			wait = 0
		}
		// A look first, and a wait only when nothing is ready: the
		// answers to the requests just written have a moment to
		// gather, so fewer passes sleep. Against nginx on 2 CPUs this
		// measured 1.01 of wrk's rate where sleeping at once measured
		// 0.96 (20 rounds of 3 s each, 2026-11-24), a gain within the
		// benchmark's noise on this machine.
		n, err := epollWait(epfd, events, 0)
		if n == 0 && err == nil && wait > 0 {
			n, err = epollWait(epfd, events, wait)
		}
		if err != nil && err != unix.EINTR {
			l.cancelAll()
			return fmt.Errorf("event loop: %w", os.NewSyscallError("epoll_wait", err))
		}
		for i := 0; i < n; i++ {
			ec := l.conns[events[i].Fd]
			if ec.fd < 0 {
				continue
			}
			if events[i].Events&unix.EPOLLOUT != 0 && ec.wantWr {
				l.write(ec)
			}
			if events[i].Events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 && ec.fd >= 0 {
				l.read(ec)
			}
		}
		if now := time.Now(); now.Sub(lastSweep) >= sweepEvery {
			lastSweep = now
			l.sweep(now)
		}
	}
}

// beginReady starts the next session on every connection that finished
// one. A session that fails at once (a refused dial) queues its connection
// again for the next pass, so one dead server cannot spin a loop without
// it ever looking at its other connections.
func (l *evLoop) beginReady() {
	todo := l.ready
	l.ready, l.next = l.next[:0], todo
	for _, ec := range todo {
		l.begin(ec)
	}
}

func (l *evLoop) begin(ec *evConn) {
	now := time.Now()
	measured, stop := l.c.decide(now)
	if stop || l.ctx.Err() != nil {
		l.closeConn(ec)
		return
	}
	ec.busy, ec.measured, ec.start, ec.deadline = true, measured, now, now.Add(l.c.r.p.Timeout)
	ec.req, ec.jar, ec.hops, ec.attempt, ec.total = l.first, nil, 0, 0, 0
	l.busy++
	l.exchange(ec)
}

// exchange sends the session's current request, dialing if needed.
func (l *evLoop) exchange(ec *evConn) {
	if ec.fd < 0 {
		if err := l.dial(ec); err != nil {
			l.fail(ec, err)
			return
		}
	}
	ec.wasReuse, ec.got, ec.wrote = ec.reused, 0, 0
	ec.p.reset(ec.req.method)
	if ec.hops == 0 && ec.jar == nil {
		ec.out = l.req0
	} else {
		l.d.writeRequest(&ec.owned, ec.req.method, ec.req.u, ec.req.body, ec.req.contentType, l.st, nil, ec.jar)
		ec.out = ec.owned.Bytes()
	}
	l.write(ec)
}

// write sends what is left of the request; when the socket is full it
// waits for EPOLLOUT.
func (l *evLoop) write(ec *evConn) {
	for ec.wrote < len(ec.out) {
		m, err := rawWrite(ec.fd, ec.out[ec.wrote:])
		if m > 0 {
			ec.wrote += m
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if !ec.wantWr {
				ec.wantWr = true
				l.ctl(ec, unix.EPOLLIN|unix.EPOLLOUT)
			}
			return
		case err != nil:
			l.fail(ec, l.opError("write", err))
			return
		}
	}
	if ec.wantWr {
		ec.wantWr = false
		l.ctl(ec, unix.EPOLLIN)
	}
	if ec.n > 0 {
		// Bytes the server sent ahead of this request: parsed now, as the
		// goroutine path parses what its reader buffered.
		l.parse(ec)
	}
}

func (l *evLoop) ctl(ec *evConn, events uint32) {
	l.hdr[0] = unix.EpollEvent{Events: events, Fd: int32(ec.idx)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, ec.fd, &l.hdr[0]); err != nil {
		l.fail(ec, os.NewSyscallError("epoll_ctl", err))
	}
}

// read takes what arrived: one read, or more while they fill the buffer.
func (l *evLoop) read(ec *evConn) {
	if !ec.busy || ec.wrote < len(ec.out) {
		l.idleRead(ec)
		return
	}
	for {
		m, err := rawRead(ec.fd, ec.buf[ec.n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			l.fail(ec, l.opError("read", err))
			return
		case m == 0:
			if err := ec.p.eof(ec.n); err != nil {
				l.fail(ec, err)
				return
			}
			ec.reused = false
			l.closeConn(ec)
			l.responded(ec)
			return
		}
		full := ec.n+m == len(ec.buf)
		ec.n += m
		ec.got += m
		if !l.parse(ec) || !full {
			return
		}
	}
}

// idleRead handles a connection that is readable between sessions, or
// while its request is still being written: the server closed it (between
// sessions the next one dials anew) or sent bytes ahead of the request
// (kept and parsed once the request is out, as the goroutine path's reader
// keeps them).
func (l *evLoop) idleRead(ec *evConn) {
	if ec.n == len(ec.buf) {
		l.fail(ec, &protocolError{kind: KindProtocol, msg: "16 KiB arrived before the request was sent"})
		return
	}
	m, err := rawRead(ec.fd, ec.buf[ec.n:])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
	case err != nil:
		l.fail(ec, l.opError("read", err))
	case m == 0:
		l.fail(ec, io.EOF)
	default:
		ec.n += m
		ec.got += m
	}
}

// parse feeds the buffered bytes to the parser; it reports whether the
// exchange is still waiting for more.
func (l *evLoop) parse(ec *evConn) bool {
	used, err := ec.p.feed(ec.buf[:ec.n])
	ec.n = copy(ec.buf, ec.buf[used:ec.n])
	if err != nil {
		l.fail(ec, err)
		return false
	}
	if ec.p.done() {
		ec.reused = true
		l.responded(ec)
		return false
	}
	return true
}

// responded handles a complete response: a redirect to follow, or the end
// of the session.
func (l *evLoop) responded(ec *evConn) {
	resp := &ec.p.resp
	ec.total += ec.p.seen
	if resp.Close {
		l.closeConn(ec)
	}
	if len(resp.SetCookies) > 0 {
		if cs := resp.Cookies(); len(cs) > 0 {
			if ec.jar == nil {
				ec.jar, _ = cookiejar.New(nil) // cannot fail without options
			}
			ec.jar.SetCookies(ec.req.u, cs)
		}
	}
	next := redirectTarget(resp, ec.req.u, l.st.follow)
	if next == nil || ec.hops == maxRedirects {
		l.finish(ec, statusKind(resp.StatusCode, l.st.Expect), time.Now())
		return
	}
	code := resp.StatusCode
	if code == http.StatusSeeOther || ((code == http.StatusFound || code == http.StatusMovedPermanently) && ec.req.method == http.MethodPost) {
		ec.req.method, ec.req.body, ec.req.contentType = http.MethodGet, nil, ""
	}
	ec.req.u = next
	ec.hops++
	ec.attempt = 0
	l.exchange(ec)
}

// fail ends the exchange with err: a retry on a fresh connection when a
// reused one turned out closed before any byte of the answer (as
// roundTrip does), otherwise the end of the session.
func (l *evLoop) fail(ec *evConn, err error) {
	if !ec.busy {
		l.closeConn(ec)
		return
	}
	l.closeConn(ec)
	bytes := ec.p.seen
	if l.ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", context.Canceled, err)
	}
	k := classify(err)
	if ec.wasReuse && ec.got == 0 && ec.attempt == 0 && (k == KindEOF || k == KindReset) {
		ec.attempt++
		l.exchange(ec)
		return
	}
	ec.total += bytes
	l.finish(ec, k, time.Now())
}

func (l *evLoop) finish(ec *evConn, kind string, end time.Time) {
	l.tally.complete(l.st.Label, ec.start, end, ec.total, kind, ec.measured)
	ec.busy = false
	l.busy--
	l.ready = append(l.ready, ec)
}

// sweep ends the sessions whose deadline passed.
func (l *evLoop) sweep(now time.Time) {
	for _, ec := range l.conns {
		if ec.busy && now.After(ec.deadline) {
			l.fail(ec, l.opError("read", os.ErrDeadlineExceeded))
		}
	}
}

// cancelAll ends every session in flight: the run was interrupted.
func (l *evLoop) cancelAll() {
	for _, ec := range l.conns {
		if ec.busy {
			l.closeConn(ec)
			l.finish(ec, kindCanceled, time.Now())
		}
	}
	l.ready = l.ready[:0]
}

func (l *evLoop) dial(ec *evConn) error {
	dctx, cancel := context.WithDeadline(l.ctx, ec.deadline)
	conn, err := l.d.dial(dctx, "tcp", l.d.addr)
	cancel()
	if err != nil {
		return fmt.Errorf("dial %s: %w", l.d.addr, err)
	}
	fd, err := detach(conn)
	if err != nil {
		return fmt.Errorf("dial %s: %w", l.d.addr, err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ec.idx)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return os.NewSyscallError("epoll_ctl", err)
	}
	ec.fd, ec.reused, ec.wantWr, ec.n = fd, false, false, 0
	return nil
}

// detach takes a dialed socket from the Go runtime: the loop keeps a
// duplicate of its descriptor (non-blocking, like the original: the flag
// belongs to the socket) and the net.Conn, with its poller registration,
// is closed.
func detach(c net.Conn) (int, error) {
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("a %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	return fd, nil
}

func (l *evLoop) closeConn(ec *evConn) {
	if ec.fd >= 0 {
		unix.Close(ec.fd) // also leaves the epoll set: the loop held the only descriptor
		ec.fd = -1
	}
	ec.reused, ec.wantWr, ec.n = false, false, 0
}

func (l *evLoop) closeAll() {
	for _, ec := range l.conns {
		l.closeConn(ec)
	}
}

// opError wraps a system call error as net.Conn would, so that error kinds
// classify alike on both paths.
func (l *evLoop) opError(op string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: "tcp", Err: err}
}

// batchThread puts the calling thread in SCHED_BATCH, its nice value kept,
// and reports whether it did. A batch thread that wakes does not preempt
// the task running on its CPU; it runs when that task sleeps or its slice
// ends.
//
// Why: against a server on the same CPUs, an answer that finds a loop
// asleep in epoll_wait wakes it from the server's context (the loopback
// packet is processed by its sender), and a woken loop of the ordinary
// policy preempted the server: on the other CPU by a rescheduling IPI, a
// VM exit here. nginx driven by the loops woke them 0.34 times per request,
// 0.13-0.15 times with an IPI, was preempted 0.28-0.33 times per request,
// and spent 37.6 µs of CPU per request (medians of 4 runs of 5 s,
// 2026-11-29, perf stat on its workers); wrk, whose loops make five system
// calls per request to the loops' three and so are found asleep less
// often, cost it 3-4 % less in the benchmark's rounds. With batch loops:
// 0.05 wake-ups, 0.01 IPIs and 0.008 preemptions per request, nginx 27.4 µs,
// the generator 15.0 µs instead of 29.1 µs (its own wake-ups and switches
// went too). The closed loop has no schedule to keep: a loop that waits
// for the server's slice to end delays only its own next request, which
// that CPU was busy serving. A thread of another policy (real-time, idle)
// is left as it is, and where the kernel or a seccomp filter refuses the
// call the loop runs as before.
func batchThread() bool {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil || attr.Policy != unix.SCHED_NORMAL {
		return false
	}
	attr.Policy = unix.SCHED_BATCH
	return unix.SchedSetAttr(0, attr, 0) == nil
}

// The loop's system calls are raw: they do not tell the Go scheduler that
// the thread may block (entersyscall), so the loop keeps its P while it
// waits in epoll_wait, as a C event loop keeps its CPU. With the ordinary
// calls, the scheduler's monitor takes the P of a thread that waits longer
// than 20 µs and hands it to another thread, which spins looking for work
// and gives it back: the ratio to wrk fell from 1.02 to 0.88 and the CPU
// per request rose from 12.3 to 15.5 µs (benchmarks/load -only efficiency,
// 4 rounds each, alternated, 2026-11-24). An extra P for the rest of the
// program (GOMAXPROCS 3 on 2 CPUs) made it worse, not better (0.90).
//
// What keeps the program responsive: epoll_wait returns at least every
// sweepEvery (10 ms), the loop checks the context then, and the runtime's
// monitor preempts a goroutine that holds its P for 10 ms (a signal ends
// epoll_wait with EINTR), which lets the other goroutines (signal
// handling, progress, the garbage collector's stop-the-world) run.

func epollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, unix.ENOBUFS // callers never read into a full buffer
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
