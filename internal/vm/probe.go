package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"ctrperf/internal/fsutil"
)

// BootProbe is whether a stock guest kernel boots under an accelerator:
// QEMU boots the guest kernel with no root filesystem and the kernel
// must get as far as mounting one ("VFS: Unable to mount root fs"), which
// is every instruction of a boot but userspace. Creating a VM proves
// little: on PVM a VM is created and a stock kernel still stops.
type BootProbe struct {
	Accel  string `json:"accel"`
	Kernel string `json:"kernel"` // the guest kernel's version
	QEMU   string `json:"qemu"`
	Boots  bool   `json:"boots"`
	// Reason says why not (QEMU's error, or how far the console got).
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds"`
	// Cached: this answer was read from the cache, not probed now.
	Cached bool      `json:"cached,omitempty"`
	At     time.Time `json:"at"`
}

// bootMarker is what the guest kernel prints when it has booted and finds
// no root filesystem: the probe's success.
const bootMarker = "VFS: Unable to mount root fs"

// probeConsoleTail is how much of the console a failed probe keeps.
const probeConsoleTail = 64 << 10

// ProbeBoot boots k under accel with QEMU at qemu, for at most timeout.
func ProbeBoot(ctx context.Context, qemu string, k Kernel, accel string, timeout time.Duration) BootProbe {
	p := BootProbe{Accel: accel, Kernel: k.Version, QEMU: qemu, At: time.Now().UTC()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-accel", accel, "-m", "256", "-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", k.Image, "-append", "console=ttyS0 panic=-1 loglevel=4"}
	if accel == AccelKVM {
		args = append(args, "-cpu", "host")
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	var out tailBuffer
	out.max = probeConsoleTail
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err := cmd.Run()
	p.Seconds = time.Since(start).Seconds()
	console := out.String()
	switch {
	case strings.Contains(console, bootMarker):
		p.Boots = true
	case ctx.Err() != nil:
		p.Reason = fmt.Sprintf("the guest kernel %s did not boot under -accel %s within %s (last console line: %q)", k.Version, accel, timeout, lastLine(console))
	case err != nil:
		p.Reason = fmt.Sprintf("QEMU stopped booting %s under -accel %s: %v: %s", k.Version, accel, err, qemuError(console))
	default:
		p.Reason = fmt.Sprintf("QEMU exited before the guest kernel %s booted under -accel %s: %s", k.Version, accel, qemuError(console))
	}
	return p
}

// qemuError is the telling line of QEMU's output: its own error, else the
// console's last line.
func qemuError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "KVM internal error") || strings.Contains(l, "qemu-system") && strings.Contains(strings.ToLower(l), "error") {
			return strings.TrimSpace(l)
		}
	}
	return fmt.Sprintf("last console line %q", lastLine(out))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	// Escape sequences of the BIOS make lines unreadable: keep printables.
	l := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, lines[len(lines)-1])
	if len(l) > 200 {
		l = l[len(l)-200:]
	}
	return l
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n, err := t.Buffer.Write(p)
	if t.Len() > 2*t.max {
		b := append([]byte(nil), t.Bytes()[t.Len()-t.max:]...)
		t.Reset()
		t.Buffer.Write(b)
	}
	return n, err
}

// ProbeKey names what a probe's answer depends on: QEMU's and the
// kernel's files (path, size, modification time) and facts of the
// machine the caller adds (the KVM module, the boot id), so that a cached
// answer is never one of another QEMU, kernel or boot.
func ProbeKey(qemu string, k Kernel, accel string, facts ...string) string {
	h := sha256.New()
	for _, f := range []string{qemu, k.Image} {
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(h, "%s missing\n", f)
			continue
		}
		fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "accel %s\n", accel)
	for _, f := range facts {
		fmt.Fprintf(h, "%s\n", f)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

type cachedProbe struct {
	Key   string    `json:"key"`
	Probe BootProbe `json:"probe"`
}

// CachedProbe is the answer of file for key, else probe's, stored there
// (a probe of a kernel that does not boot costs its whole timeout, and
// doctor runs before every bench).
func CachedProbe(file, key string, probe func() BootProbe) BootProbe {
	if b, err := os.ReadFile(file); err == nil {
		var c cachedProbe
		if json.Unmarshal(b, &c) == nil && c.Key == key {
			c.Probe.Cached = true
			return c.Probe
		}
	}
	p := probe()
	if b, err := json.MarshalIndent(cachedProbe{Key: key, Probe: p}, "", "  "); err == nil {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err == nil {
			_ = fsutil.WriteFileAtomic(file, append(b, '\n'), 0o644)
		}
	}
	return p
}

// errNoQEMU is wrapped when qemu-system-x86_64 is not installed.
var errNoQEMU = errors.New("qemu-system-x86_64 not installed (Debian package qemu-system-x86)")
