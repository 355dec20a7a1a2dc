package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
)

// netnsDir is where named network namespaces live (as with `ip netns`).
const netnsDir = "/run/netns"

// benchNet is 198.18.0.0/15, the range RFC 2544 reserves for benchmarking:
// the only non-loopback addresses ctrperf ever dials outside its containers.
var benchNet = netip.MustParsePrefix("198.18.0.0/15")

// externalNames are the kernel names of a run's client namespace and veth
// pair. They derive from the run id alone so that `ctrperf clean` finds them
// after SIGKILL; interface names must fit 15 characters.
func externalNames(runID string) (nsName, hostIf, peerIf string) {
	s := shortID(runID)
	return NamePrefix + "-" + s, NamePrefix + s + "h", NamePrefix + s + "n"
}

// externalSlot returns the /30 of slot i (0..511) of 198.18.0.0/15:
// 198.18.X.1 on the host side, 198.18.X.2 in the namespace.
func externalSlot(i int) (host, peer netip.Addr) {
	b := [4]byte{198, byte(18 + i/256), byte(i % 256), 1}
	host = netip.AddrFrom4(b)
	b[3] = 2
	return host, netip.AddrFrom4(b)
}

// freeExternalSlot picks the first slot whose addresses nobody uses.
func freeExternalSlot(used []netip.Addr) (int, error) {
	taken := map[[3]byte]bool{}
	for _, a := range used {
		if benchNet.Contains(a) {
			b := a.As4()
			taken[[3]byte{b[0], b[1], b[2]}] = true
		}
	}
	for i := 0; i < 512; i++ {
		h, _ := externalSlot(i)
		b := h.As4()
		if !taken[[3]byte{b[0], b[1], b[2]}] {
			return i, nil
		}
	}
	return 0, fmt.Errorf("all 512 client networks in %s are in use; run `ctrperf clean`", benchNet)
}

// externalNet is the client side of published-external: a network
// namespace of ctrperf's own linked to the host by a veth pair, so that the
// load generator's packets arrive on an interface like a separate machine's
// and take Docker's DNAT in PREROUTING.
type externalNet struct {
	Netns  string     `json:"netns"`
	HostIf string     `json:"host_if"`
	PeerIf string     `json:"peer_if"`
	HostIP netip.Addr `json:"host_ip"` // the address published ports bind to
	PeerIP netip.Addr `json:"peer_ip"` // the client's address
	handle netns.NsHandle
}

// setupExternal creates the namespace and veth pair of a run. On error it
// removes whatever it created.
func setupExternal(runID, lockDir string) (ext *externalNet, err error) {
	nsName, hostIf, peerIf := externalNames(runID)
	unlock, err := lockFile(filepath.Join(lockDir, "netns.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	defer func() {
		if err != nil {
			_ = removeExternal(runID)
		}
	}()

	addrs, err := kernel.NetlinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("published-external: list host addresses: %w", err)
	}
	var used []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			used = append(used, ip)
		}
	}
	slot, err := freeExternalSlot(used)
	if err != nil {
		return nil, err
	}
	hostIP, peerIP := externalSlot(slot)
	ext = &externalNet{Netns: nsName, HostIf: hostIf, PeerIf: peerIf, HostIP: hostIP, PeerIP: peerIP}

	ns, err := newNamedNetns(nsName)
	if err != nil {
		return nil, fmt.Errorf("published-external: create network namespace %s: %w", nsName, err)
	}
	ext.handle = ns

	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIf}, PeerName: peerIf, PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("published-external: create veth %s/%s: %w", hostIf, peerIf, err)
	}
	host, err := netlink.LinkByName(hostIf)
	if err != nil {
		return nil, fmt.Errorf("published-external: find veth %s: %w", hostIf, err)
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(hostIP, 30)}); err != nil {
		return nil, fmt.Errorf("published-external: address %s/30 on %s: %w", hostIP, hostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, fmt.Errorf("published-external: set %s up: %w", hostIf, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("published-external: netlink in %s: %w", nsName, err)
	}
	defer h.Close()
	for _, name := range []string{"lo", peerIf} {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("published-external: find %s in %s: %w", name, nsName, err)
		}
		if name == peerIf {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(peerIP, 30)}); err != nil {
				return nil, fmt.Errorf("published-external: address %s/30 on %s in %s: %w", peerIP, peerIf, nsName, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("published-external: set %s up in %s: %w", name, nsName, err)
		}
	}
	return ext, nil
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// onOwnThread runs fn on a locked OS thread of its own, which fn may switch
// into another network namespace (a socket keeps the namespace it was
// created in; netns.NewNamed enters the namespace it creates), and switches
// that thread back to the namespace it started in. A thread that cannot be
// switched back stays locked and dies with its goroutine, so no other code
// ever runs in the wrong namespace; drop then releases what fn made, and
// the caller gets the switch's error.
func onOwnThread[T any](fn func() (T, error), drop func(T)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- res{err: fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		v, err := fn()
		if serr := netns.Set(orig); serr != nil {
			if err == nil {
				drop(v)
			}
			var zero T
			ch <- res{zero, fmt.Errorf("switch back to the host netns: %w", serr)}
			return // the thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		ch <- res{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// newNamedNetns creates a named namespace on a thread of its own, so that a
// failure to switch back can only ever taint a thread that then dies.
func newNamedNetns(name string) (netns.NsHandle, error) {
	h, err := onOwnThread(func() (netns.NsHandle, error) { return netns.NewNamed(name) }, func(h netns.NsHandle) { h.Close() })
	if err != nil {
		return netns.None(), err
	}
	return h, nil
}

// Dial connects from inside the namespace. The socket is created on a
// thread switched into the namespace (a socket keeps the namespace it was
// created in); only 198.18.0.0/15 addresses are dialled.
func (e *externalNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, e.Netns, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !benchNet.Contains(ip) {
		return nil, fmt.Errorf("dial %s from %s: only addresses in %s are dialled from the client namespace", addr, e.Netns, benchNet)
	}
	c, err := onOwnThread(func() (net.Conn, error) {
		if err := netns.Set(e.handle); err != nil {
			return nil, fmt.Errorf("enter %s: %w", e.Netns, err)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}, func(c net.Conn) { c.Close() })
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, e.Netns, err)
	}
	return c, nil
}

// close releases the namespace handle (not the namespace).
func (e *externalNet) close() {
	if e != nil && e.handle.IsOpen() {
		e.handle.Close()
		e.handle = netns.None()
	}
}

// removeExternal deletes a run's namespace (which destroys the peer veth
// and with it the pair) and the host veth in case the namespace is already
// gone. Missing pieces are not errors.
func removeExternal(runID string) error {
	nsName, hostIf, _ := externalNames(runID)
	_, err := removeNetnsAndVeth([]string{nsName}, []string{hostIf})
	return err
}

// removeNetnsAndVeth removes named namespaces and host veths, reporting what
// existed.
func removeNetnsAndVeth(namespaces, links []string) ([]string, error) {
	var removed []string
	var errs []error
	for _, n := range namespaces {
		p := filepath.Join(netnsDir, n)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		// A kill between creating the file and bind-mounting it leaves a
		// plain file: unmount errors are expected then.
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount netns %s: %w", p, err))
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove netns %s: %w", p, err))
			continue
		}
		removed = append(removed, "netns "+n)
	}
	for _, name := range links {
		l, err := netlink.LinkByName(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				continue
			}
			errs = append(errs, fmt.Errorf("find veth %s: %w", name, err))
			continue
		}
		if l.Type() != "veth" {
			continue // not ours: ctrperf only creates veths
		}
		if err := netlink.LinkDel(l); err != nil {
			var nf netlink.LinkNotFoundError
			if !errors.As(err, &nf) && !strings.Contains(err.Error(), "no such") {
				errs = append(errs, fmt.Errorf("delete veth %s: %w", name, err))
				continue
			}
		}
		removed = append(removed, "veth "+name)
	}
	return removed, errors.Join(errs...)
}

// listExternal returns every ctrperf client namespace and host veth, for
// `ctrperf clean` without a run id.
func listExternal() (namespaces, links []string, err error) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("list %s: %w", netnsDir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), NamePrefix) {
			namespaces = append(namespaces, e.Name())
		}
	}
	ls, err := kernel.NetlinkDump(netlink.LinkList)
	if err != nil {
		return namespaces, nil, fmt.Errorf("list links: %w", err)
	}
	for _, l := range ls {
		if a := l.Attrs(); strings.HasPrefix(a.Name, NamePrefix) && l.Type() == "veth" {
			links = append(links, a.Name)
		}
	}
	return namespaces, links, nil
}

// lockFile takes an exclusive flock on path (created if needed) so that
// concurrent runs do not pick the same client network.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
