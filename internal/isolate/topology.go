// Package isolate is the real-time CPU and interrupt isolation controller of
// `ctrperf isolate`, after the control scheme of the IBM Research Tokyo paper
// (seed 002): containers that behave normally get CPUs of their own, a
// container that saturates its CPUs turns "hot" and is released (policy
// paper) or confined to the shared pool (policy strict), and network
// interrupts and the packet steering of container veths are kept on CPUs no
// container owns, rotated among them.
//
// Decisions are pure functions of (topology, state, usage); reading the
// machine and writing cpusets, IRQ affinities and RPS masks happens behind
// small interfaces at the edge.
package isolate

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

// CPU is one logical CPU and where it sits.
type CPU struct {
	ID     int
	Core   int // core id, unique within the socket
	Socket int
}

// Topology is the set of online CPUs the controller may place containers on.
type Topology struct {
	CPUs []CPU
}

// All returns every CPU of the topology.
func (t Topology) All() cpuset.CPUSet {
	ids := make([]int, 0, len(t.CPUs))
	for _, c := range t.CPUs {
		ids = append(ids, c.ID)
	}
	return cpuset.New(ids...)
}

type coreKey struct{ socket, core int }

// Cores groups the CPUs by physical core (SMT siblings together), ordered by
// the lowest CPU id of each core.
func (t Topology) Cores() []cpuset.CPUSet {
	by := map[coreKey][]int{}
	for _, c := range t.CPUs {
		k := coreKey{c.Socket, c.Core}
		by[k] = append(by[k], c.ID)
	}
	out := make([]cpuset.CPUSet, 0, len(by))
	for _, ids := range by {
		out = append(out, cpuset.New(ids...))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].List()[0] < out[j].List()[0] })
	return out
}

// ThreadsPerCore is the SMT width (1 without SMT).
func (t Topology) ThreadsPerCore() int {
	cores := t.Cores()
	if len(cores) == 0 {
		return 1
	}
	return cores[0].Size()
}

// DiscoverTopology reads the online CPUs and their core and socket ids
// under kfs's sys root (<sys>/devices/system/cpu).
func DiscoverTopology(kfs kernel.FS) (Topology, error) {
	cpuDir := kfs.Sys("devices", "system", "cpu")
	online, err := os.ReadFile(filepath.Join(cpuDir, "online"))
	if err != nil {
		return Topology{}, fmt.Errorf("read online CPUs: %w", err)
	}
	set, err := cpuset.Parse(strings.TrimSpace(string(online)))
	if err != nil {
		return Topology{}, fmt.Errorf("parse %s/online %q: %w", cpuDir, strings.TrimSpace(string(online)), err)
	}
	var t Topology
	for _, id := range set.List() {
		c := CPU{ID: id, Core: id, Socket: 0}
		dir := filepath.Join(cpuDir, fmt.Sprintf("cpu%d", id), "topology")
		if v, err := readInt(filepath.Join(dir, "core_id")); err == nil {
			c.Core = v
		}
		if v, err := readInt(filepath.Join(dir, "physical_package_id")); err == nil && v >= 0 {
			c.Socket = v
		}
		t.CPUs = append(t.CPUs, c)
	}
	if len(t.CPUs) == 0 {
		return Topology{}, fmt.Errorf("no online CPUs under %s", cpuDir)
	}
	return t, nil
}

func readInt(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseInt(f)
}

func parseInt(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return 0, fmt.Errorf("empty")
	}
	return strconv.Atoi(strings.TrimSpace(sc.Text()))
}

// HexMask renders a CPU set in the comma-separated 32-bit hex word format of
// /proc/irq/N/smp_affinity and /sys/class/net/DEV/queues/rx-N/rps_cpus, for
// a machine with n CPUs.
func HexMask(s cpuset.CPUSet, n int) string {
	words := (n + 31) / 32
	if words == 0 {
		words = 1
	}
	w := make([]uint32, words)
	for _, c := range s.List() {
		if c/32 < words {
			w[c/32] |= 1 << uint(c%32)
		}
	}
	parts := make([]string, words)
	for i := range w {
		parts[words-1-i] = fmt.Sprintf("%08x", w[i])
	}
	// The kernel prints the leading word without padding; both parse.
	parts[0] = strings.TrimLeft(parts[0], "0")
	if parts[0] == "" {
		parts[0] = "0"
	}
	return strings.Join(parts, ",")
}

// ParseHexMask is the inverse of HexMask.
func ParseHexMask(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), fmt.Errorf("empty mask")
	}
	parts := strings.Split(s, ",")
	var ids []int
	for i := range parts {
		word := parts[len(parts)-1-i]
		v, err := strconv.ParseUint(word, 16, 32)
		if err != nil {
			return cpuset.New(), fmt.Errorf("parse mask %q: word %q: %w", s, word, err)
		}
		for b := 0; b < 32; b++ {
			if v&(1<<uint(b)) != 0 {
				ids = append(ids, i*32+b)
			}
		}
	}
	return cpuset.New(ids...), nil
}
