package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
)

// benchNetPrefix starts every address of ctrperf's client namespaces
// (198.18.0.0/15, RFC 2544's benchmarking range).
var benchNetPrefix = regexp.MustCompile(`\b198\.1[89]\.`)

// ctrperfObjects lists, one line each, what ctrperf may leave on the
// machine: on the user's engine the containers, networks and volumes
// labelled ctrperf.managed; the private engines ctrperf has state of (alive
// or not); its processes (private dockerd and containerd, their shims and
// docker-proxies, the ctrperf binary itself); loop devices backed by its
// files; mounts, network namespaces and network interfaces (bridges, the
// client veth pair, container veths left without a bridge) of its own;
// cgroups under every hierarchy (v1 controllers and cgroup2) that are
// ctrperf's or belong to a container the user's engine does not know; and
// iptables rules and chains naming ctrperf or its client addresses. A line
// names the object so a failure says what was left. bin is the ctrperf
// binary under test (its processes count).
func ctrperfObjects(t *testing.T, cli client.APIClient, bin string) []string {
	t.Helper()
	var objs []string
	objs = append(objs, dockerObjects(t, cli)...)
	if engines, err := daemon.List(); err != nil {
		objs = append(objs, "private engine state unreadable: "+err.Error())
	} else {
		for _, e := range engines {
			objs = append(objs, "private engine "+e.Name+" alive="+strconv.FormatBool(e.Alive))
		}
	}
	objs = append(objs, ctrperfProcesses(bin)...)
	objs = append(objs, ctrperfLinks()...)
	objs = append(objs, ctrperfCgroups(t, cli)...)
	objs = append(objs, ctrperfIPTables(t)...)

	sysRoot := kernel.SysMount
	loops, _ := filepath.Glob(filepath.Join(sysRoot, "block", "loop*", "loop", "backing_file"))
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), engine.NamePrefix) {
			objs = append(objs, "loop "+filepath.Base(filepath.Dir(filepath.Dir(l)))+" "+strings.TrimSpace(string(b)))
		}
	}
	mnts, err := kernel.Mounts(kernel.ProcMount)
	if err != nil {
		t.Fatalf("list mounts: %v", err)
	}
	for _, m := range mnts {
		if strings.Contains(m.Point, engine.NamePrefix) || strings.Contains(m.Source, engine.NamePrefix) {
			objs = append(objs, "mount "+m.Point+" ("+m.FSType+" "+m.Source+")")
		}
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.Contains(e.Name(), engine.NamePrefix) {
				objs = append(objs, "netns "+e.Name())
			}
		}
	}
	slices.Sort(objs)
	return objs
}

// dockerObjects are the user's engine's objects labelled ctrperf.managed.
func dockerObjects(t *testing.T, cli client.APIClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var objs []string
	f := client.Filters{}.Add("label", engine.LabelManaged+"=true")
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range cs.Items {
		objs = append(objs, "container "+strings.Join(c.Names, ","))
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	for _, n := range ns.Items {
		objs = append(objs, "network "+n.Name)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs.Items {
		objs = append(objs, "volume "+v.Name)
	}
	return objs
}

// proc is one process: its argv and parent.
type proc struct {
	pid, ppid int
	argv      []string
}

func processes() map[int]proc {
	out := map[int]proc{}
	dirs, _ := filepath.Glob(filepath.Join(kernel.ProcMount, "[0-9]*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || !kernel.ProcAlive(kernel.ProcMount, pid) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		p := proc{pid: pid, argv: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")}
		if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			// The fields after the parenthesised name: state, ppid.
			if i := strings.LastIndexByte(string(st), ')'); i >= 0 {
				if f := strings.Fields(string(st[i+1:])); len(f) > 1 {
					p.ppid, _ = strconv.Atoi(f[1])
				}
			}
		}
		out[pid] = p
	}
	return out
}

// ctrperfProcesses are the engine processes of ctrperf (their command line
// names its run or lib dir), docker-proxies whose dockerd is ctrperf's or
// gone, and processes of the ctrperf binary under test.
func ctrperfProcesses(bin string) []string {
	procs := processes()
	mine := func(p proc) bool {
		return strings.Contains(strings.Join(p.argv, " "), engine.NamePrefix)
	}
	var objs []string
	for _, p := range procs {
		name := filepath.Base(p.argv[0])
		var owned bool
		switch {
		case p.argv[0] == bin:
			owned = true
		case name == "dockerd", name == "containerd", strings.HasPrefix(name, "containerd-shim"):
			owned = mine(p)
		case name == "docker-proxy":
			parent, ok := procs[p.ppid]
			owned = !ok || p.ppid == 1 || mine(parent)
		}
		if owned {
			objs = append(objs, "process "+strconv.Itoa(p.pid)+" "+strings.Join(p.argv, " "))
		}
	}
	return objs
}

// ctrperfLinks are network interfaces named ctrperf (private bridges, the
// client veth pair) and veths whose bridge is ctrperf's or gone.
func ctrperfLinks() []string {
	dir := kernel.ClassNetDir(kernel.SysMount)
	ents, _ := os.ReadDir(dir)
	var objs []string
	for _, e := range ents {
		name := e.Name()
		master := ""
		if l, err := os.Readlink(filepath.Join(dir, name, "master")); err == nil {
			master = filepath.Base(l)
		}
		switch {
		case strings.Contains(name, engine.NamePrefix):
			objs = append(objs, "link "+name)
		case strings.HasPrefix(name, "veth") && (master == "" || strings.Contains(master, engine.NamePrefix)):
			objs = append(objs, "veth "+name+" master="+master)
		}
	}
	return objs
}

// containerID is a Docker container's cgroup directory name.
var containerID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ctrperfCgroups walks every cgroup hierarchy (each v1 controller, the
// named systemd one, the cgroup2 mount) for groups with ctrperf in their
// path, and container groups of containers the user's engine does not have
// (a private engine's, or a removed container's).
func ctrperfCgroups(t *testing.T, cli client.APIClient) []string {
	t.Helper()
	mnts, err := kernel.Mounts(kernel.ProcMount)
	if err != nil {
		t.Fatalf("list mounts: %v", err)
	}
	var groups []string
	for _, m := range mnts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		root := m.Point
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if strings.Count(rel, "/") > 3 {
				return filepath.SkipDir
			}
			if strings.Contains(rel, engine.NamePrefix) || containerID.MatchString(d.Name()) {
				groups = append(groups, p)
			}
			return nil
		})
	}
	// Listed after the walk: a container created in between is known, one
	// removed in between shows up once (and fails only if it stays).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	known := map[string]bool{}
	for _, c := range cs.Items {
		known[c.ID] = true
	}
	var objs []string
	for _, g := range groups {
		if base := filepath.Base(g); containerID.MatchString(base) && known[base] && !strings.Contains(g, engine.NamePrefix) {
			continue
		}
		if _, err := os.Stat(g); err == nil {
			objs = append(objs, "cgroup "+g)
		}
	}
	return objs
}

// ctrperfIPTables are iptables chains and rules (nat and filter) that name
// ctrperf (its bridges, veths, chains) or its client addresses.
func ctrperfIPTables(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var objs []string
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			// ":CHAIN POLICY [packets:bytes]": the counters change.
			if f := strings.Fields(line); strings.Contains(f[0], engine.NamePrefix) {
				objs = append(objs, "iptables "+table+" chain "+f[0][1:])
			}
		case strings.HasPrefix(line, "-A "):
			if strings.Contains(line, engine.NamePrefix) || benchNetPrefix.MatchString(line) {
				objs = append(objs, "iptables "+table+" "+line)
			}
		}
	}
	return objs
}

// newObjects is what after has and before had not.
func newObjects(before, after []string) []string {
	var added []string
	for _, o := range after {
		if !slices.Contains(before, o) {
			added = append(added, o)
		}
	}
	return added
}
