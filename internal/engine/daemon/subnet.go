package daemon

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"ctrperf/internal/kernel"
)

// bridgeCandidates are the /24s a private engine's bridge may take: inside
// 10.213.0.0/16, away from Docker's own default pools (172.17-31/16,
// 192.168/16) and from 198.18.0.0/15, which ctrperf's client namespaces use.
func bridgeCandidates() []*net.IPNet {
	var out []*net.IPNet
	for i := 0; i < 256; i++ {
		out = append(out, &net.IPNet{IP: net.IPv4(10, 213, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)})
	}
	return out
}

// pickSubnet returns the first candidate that overlaps none of the networks
// already on the host (routes and interface addresses).
func pickSubnet(used []*net.IPNet, candidates []*net.IPNet) (*net.IPNet, error) {
	for _, c := range candidates {
		free := true
		for _, u := range used {
			if u.Contains(c.IP) || c.Contains(u.IP) {
				free = false
				break
			}
		}
		if free {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no free /24 for a private engine bridge among %d candidates starting at %s", len(candidates), candidates[0])
}

// hostNetworks lists the IPv4 networks of every route and interface address.
func hostNetworks() ([]*net.IPNet, error) {
	var out []*net.IPNet
	routes, err := kernel.NetlinkDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
			out = append(out, r.Dst)
		}
	}
	addrs, err := kernel.NetlinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		out = append(out, &net.IPNet{IP: a.IP.Mask(a.Mask), Mask: a.Mask})
	}
	return out, nil
}

// createBridge makes the bridge dockerd is told to use (--bridge needs an
// existing one) with the first free subnet; the gateway is .1. It returns
// the gateway address with its prefix and the subnet.
func createBridge(name string) (gateway, subnet string, err error) {
	used, err := hostNetworks()
	if err != nil {
		return "", "", err
	}
	sub, err := pickSubnet(used, bridgeCandidates())
	if err != nil {
		return "", "", err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return "", "", fmt.Errorf("create bridge %s: %w", name, err)
	}
	gw := &net.IPNet{IP: net.IPv4(sub.IP[0], sub.IP[1], sub.IP[2], 1).To4(), Mask: sub.Mask}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil {
		return "", "", fmt.Errorf("add address %s to bridge %s: %w", gw, name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return "", "", fmt.Errorf("set bridge %s up: %w", name, err)
	}
	return gw.String(), sub.String(), nil
}

// deleteBridge removes the bridge if it exists.
func deleteBridge(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if _, ok := err.(netlink.LinkNotFoundError); ok {
			return false, nil
		}
		return false, fmt.Errorf("find bridge %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return false, fmt.Errorf("delete bridge %s: %w", name, err)
	}
	return true, nil
}
