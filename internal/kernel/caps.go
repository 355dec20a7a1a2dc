package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// capabilityNames are the kernel's capabilities by number
// (include/uapi/linux/capability.h), as `capsh --decode` names them.
var capabilityNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// CapabilityName is the name of capability n, or "cap_<n>" for one newer
// than this table.
func CapabilityName(n int) string {
	if n >= 0 && n < len(capabilityNames) {
		return capabilityNames[n]
	}
	return fmt.Sprintf("cap_%d", n)
}

// BoundingSet reads a process's capability bounding set (CapBnd in
// procRoot/PID/status).
func BoundingSet(procRoot string, pid int) (uint64, error) {
	p := filepath.Join(procRoot, strconv.Itoa(pid), "status")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: CapBnd %q: %w", p, strings.TrimSpace(v), err)
			}
			return set, nil
		}
	}
	return 0, fmt.Errorf("%s: no CapBnd line", p)
}

// LastCapability is the kernel's highest capability number
// (procRoot/sys/kernel/cap_last_cap).
func LastCapability(procRoot string) (int, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "cap_last_cap"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// MissingCapabilities names the capabilities 0..last that set lacks.
func MissingCapabilities(set uint64, last int) []string {
	var out []string
	for n := 0; n <= last && n < 64; n++ {
		if set&(1<<uint(n)) == 0 {
			out = append(out, CapabilityName(n))
		}
	}
	return out
}

// HostPID finds the process whose pid is nsPID in the pid namespace one
// level below the host's (the second NSpid entry in /proc/PID/status)
// among the descendants of ancestor (a host pid): how a pid that a
// dockerd in a container reports (in the container's namespace) is found
// on the host. It walks f's processes; an error says none matched.
func (f FS) HostPID(nsPID, ancestor int) (int, error) {
	pids, err := f.PIDs()
	if err != nil {
		return 0, err
	}
	type proc struct{ ppid, level1 int }
	procs := map[int]proc{}
	for _, pid := range pids {
		b, err := os.ReadFile(f.Proc(strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		p := proc{level1: -1}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				p.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			} else if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(v); len(f) >= 2 {
					p.level1, _ = strconv.Atoi(f[1])
				}
			}
		}
		procs[pid] = p
	}
	for pid, p := range procs {
		if p.level1 != nsPID {
			continue
		}
		for up, seen := p.ppid, 0; up > 1 && seen < 64; up, seen = procs[up].ppid, seen+1 {
			if up == ancestor {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process with pid %d in the namespace below the host's under pid %d", nsPID, ancestor)
}
