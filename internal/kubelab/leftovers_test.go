package kubelab

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Leftovers lists every object of the lab cluster on this machine, one line
// each ("process 1234 etcd ...", "netns kube-node-1", ...), sorted. Empty
// when no cluster is there. Run it as root (mountinfo, iptables).
func Leftovers() ([]string, error) {
	var out []string
	add := func(kind string, items ...string) {
		for _, it := range items {
			out = append(out, kind+" "+it)
		}
	}
	procs, err := processes()
	if err != nil {
		return nil, err
	}
	add("process", procs...)
	mounts, err := mounts()
	if err != nil {
		return nil, err
	}
	add("mount", mounts...)
	ns, _ := filepath.Glob("/run/netns/" + NodePrefix + "*")
	add("netns", ns...)
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if strings.HasPrefix(l.Name(), Bridge) || strings.HasPrefix(l.Name(), NodePrefix) {
			add("link", l.Name())
		}
	}
	add("route", grepLines(run("ip", "-4", "route", "show"), NodeNet, "198.19.6", "198.19.96.")...)
	add("iptables", grepLines(run("iptables-save"), Chain, "ctrperf-kube", "KUBE-")...)
	if _, err := exec.LookPath("nft"); err == nil {
		add("nftables", grepLines(run("nft", "list", "tables"), "kube")...)
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + CgroupRoot)
	add("cgroup", cgroups...)
	for _, f := range []string{StateDir, RunDir} {
		if _, err := os.Lstat(f); err == nil {
			add("file", f)
		}
	}
	sort.Strings(out)
	return out, nil
}

// processes are those whose command line names the cluster's directories:
// every process of the cluster reads its configuration or data from there
// (containerd shims name their containerd's socket under RunDir).
func processes() ([]string, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		cmd := string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
		if strings.Contains(cmd, StateDir) || strings.Contains(cmd, RunDir) {
			out = append(out, filepath.Base(d)+" "+cmd)
		}
	}
	return out, nil
}

// mounts are mount points under the cluster's directories or its nodes'
// netns files.
func mounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if strings.HasPrefix(mp, StateDir) || strings.HasPrefix(mp, RunDir) || strings.HasPrefix(mp, "/run/netns/"+NodePrefix) {
			out = append(out, mp)
		}
	}
	return out, s.Err()
}

func run(name string, args ...string) string {
	b, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s failed: %v: %s", name, err, b)
	}
	return string(b)
}

func grepLines(text string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return out
}
