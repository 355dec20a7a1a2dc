package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"ctrperf/internal/kernel"
	"ctrperf/internal/observe"
)

// A sampler agent of runtime kubernetes runs in a pod of the node it
// samples, so its own cgroup says where that node's kubelet keeps pods:
// below the kubelet's cgroupRoot, in "kubepods" (driver cgroupfs) or
// "kubepods.slice" (driver systemd). A pod's cgroup is then found from its
// UID alone, in the QoS class directories of either driver, never by a
// search of the whole hierarchy: on a machine whose nodes share one kernel
// (the lab), a search would find another node's pods as well.

// ErrNotInPod is returned when the agent's own cgroup is under no
// kubepods: it runs in no pod, and cannot know the node's pods.
var ErrNotInPod = errors.New("this agent runs in no Kubernetes pod (no kubepods in its own cgroup)")

// KubepodsRoot is the node's kubepods cgroup, relative to a hierarchy's
// root, from the agent's own cgroup paths (kernel.ParseProcCgroup's map):
// "/ctrperf-kube/kube-node-2/kubepods/besteffort/pod<uid>/<id>" gives
// "/ctrperf-kube/kube-node-2/kubepods".
func KubepodsRoot(l kernel.Layout, self map[string]string) (string, error) {
	p, ok := self["cpuacct"]
	if l.Mode == kernel.V2 || !ok {
		p, ok = self[""]
	}
	if !ok {
		return "", fmt.Errorf("%w: no cpuacct or unified cgroup in %v", ErrNotInPod, self)
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, c := range parts {
		if c == "kubepods" || c == "kubepods.slice" {
			return "/" + path.Join(parts[:i+1]...), nil
		}
	}
	return "", fmt.Errorf("%w: its cgroup is %s", ErrNotInPod, p)
}

// podCgroupCandidates are where a pod's cgroup may be below kubepods: per
// QoS class (Guaranteed directly, then burstable, besteffort), for the
// cgroupfs and the systemd driver.
func podCgroupCandidates(kubepods, uid string) []string {
	u := strings.ReplaceAll(uid, "-", "_")
	var out []string
	if strings.HasSuffix(kubepods, ".slice") {
		out = append(out, path.Join(kubepods, "kubepods-pod"+u+".slice"))
		for _, q := range []string{"burstable", "besteffort"} {
			out = append(out, path.Join(kubepods, "kubepods-"+q+".slice", "kubepods-"+q+"-pod"+u+".slice"))
		}
		return out
	}
	out = append(out, path.Join(kubepods, "pod"+uid))
	for _, q := range []string{"burstable", "besteffort"} {
		out = append(out, path.Join(kubepods, q, "pod"+uid))
	}
	return out
}

// ResolvePods finds each pod's cgroup below kubepods in layout l (the
// directory of the CPU accounting hierarchy must exist) and names it as
// the pod's series. A pod not found is an error that names where it was
// looked for: a pod on another node, or gone.
func ResolvePods(l kernel.Layout, kubepods string, pods []PodCgroup) ([]observe.Container, error) {
	dir := func(rel string) string { return path.Join(l.Unified, rel) }
	if l.HasV1("cpuacct") {
		dir = func(rel string) string { return l.Path("cpuacct", rel) }
	}
	var out []observe.Container
	var errs []error
	for _, p := range pods {
		if p.UID == "" {
			errs = append(errs, fmt.Errorf("pod %s: no UID", p.Name))
			continue
		}
		cands := podCgroupCandidates(kubepods, p.UID)
		found := ""
		for _, c := range cands {
			if st, err := os.Stat(dir(c)); err == nil && st.IsDir() {
				found = c
				break
			}
		}
		if found == "" {
			errs = append(errs, fmt.Errorf("pod %s (uid %s) has no cgroup on this node: none of %s below %s (is the pod on another node?)",
				p.Name, p.UID, strings.Join(cands, ", "), dir("/")))
			continue
		}
		out = append(out, observe.Container{Name: p.Name, CgroupPath: found})
	}
	return out, errors.Join(errs...)
}
