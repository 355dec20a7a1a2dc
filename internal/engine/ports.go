package engine

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"ctrperf/internal/kernel"
)

// allocatePorts returns n distinct TCP ports that are free on every host
// address right now. The listeners are held until all are chosen so the
// kernel cannot hand out the same port twice.
func allocatePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("allocate a free host port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// checkPortFree fails with a message naming the port when something on the
// host already listens on it.
func checkPortFree(port int, service string) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port %d of service %q is already in use on the host: stop what listens there, or let ctrperf pick a free port by writing {{port:%s:%d}} in the service's command", port, service, service, port)
		}
		return fmt.Errorf("check host port %d of service %q: %w", port, service, err)
	}
	l.Close()
	return nil
}

// hostBindings assigns the ports of services that share the host's network
// namespace (host runtime, docker --net=host): referenced ports are
// relocated to free ones, the others must be free where they are.
func hostBindings(services []Service, argvOf func(Service) []string, dataOf func(Service) string) (Bindings, error) {
	b := Bindings{}
	for _, s := range services {
		reloc := RelocatedPorts(s, argvOf(s))
		sb := ServiceBinding{Host: "127.0.0.1", Ports: map[int]int{}, DataDir: dataOf(s)}
		var want []int
		for _, p := range s.Ports {
			if reloc[p] {
				want = append(want, p)
				continue
			}
			if err := checkPortFree(p, s.Name); err != nil {
				return nil, err
			}
			sb.Ports[p] = p
		}
		// A {{port:svc:P}} for an undeclared P is still relocated, so the
		// template never silently means a shared fixed port.
		for p := range reloc {
			if !hasPort(s, p) {
				want = append(want, p)
			}
		}
		got, err := allocatePorts(len(want))
		if err != nil {
			return nil, err
		}
		for i, p := range want {
			sb.Ports[p] = got[i]
		}
		b[s.Name] = sb
	}
	return b, nil
}

// CgroupPath reads the cgroup of a process from <proc>/<pid>/cgroup:
// the path below the cpu controller on v1 (the same below every controller
// for containers and for ctrperf's own groups), the unified path on v2.
func CgroupPath(fs kernel.FS, pid int) (string, error) {
	return kernel.ProcCgroupPath(fs.Proc(), pid)
}
