package kernel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NetDev is one interface's counters in /proc/net/dev: the interfaces of
// the reader's network namespace (a host of a plan's hosts: sees its own).
type NetDev struct {
	Name               string
	RxBytes, RxPackets uint64
	RxErrors, RxDrops  uint64
	TxBytes, TxPackets uint64
	TxErrors, TxDrops  uint64
}

// NetDevs reads <procRoot>/net/dev.
func NetDevs(procRoot string) ([]NetDev, error) {
	path := filepath.Join(procRoot, "net", "dev")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read net/dev in %s: %w", procRoot, unwrapPath(err))
	}
	defer f.Close()
	devs, err := ParseNetDev(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return devs, nil
}

// ParseNetDev parses /proc/net/dev: two header lines, then
// "name: rx_bytes rx_packets rx_errs rx_drop fifo frame compressed
// multicast tx_bytes tx_packets tx_errs tx_drop ...".
func ParseNetDev(r io.Reader) ([]NetDev, error) {
	sc := bufio.NewScanner(r)
	var out []NetDev
	line := 0
	for sc.Scan() {
		line++
		if line <= 2 {
			continue
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("line %d: no interface name: %q", line, sc.Text())
		}
		f := strings.Fields(rest)
		if len(f) < 12 {
			return nil, fmt.Errorf("line %d: %d counters, want 16", line, len(f))
		}
		var n [12]uint64
		for i := range n {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: counter %d: %w", line, i+1, err)
			}
			n[i] = v
		}
		out = append(out, NetDev{Name: strings.TrimSpace(name), RxBytes: n[0], RxPackets: n[1], RxErrors: n[2], RxDrops: n[3],
			TxBytes: n[8], TxPackets: n[9], TxErrors: n[10], TxDrops: n[11]})
	}
	return out, sc.Err()
}
