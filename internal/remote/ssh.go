package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ctrperf/internal/plan"
	"ctrperf/internal/selfbin"
	"ctrperf/internal/sshdest"
)

// The SSH transport wraps the system's OpenSSH client: it honours the ssh
// config as users write it (Host aliases, HostName, User, Port,
// IdentityFile, ProxyJump, Match, Include) because ssh reads it, not
// ctrperf. BatchMode always (never a password prompt); host keys checked
// strictly unless the user accepts new ones.

// Faults of reaching a host, each with its advice in the error text.
var (
	ErrUnreachable     = errors.New("host unreachable")
	ErrAuthRefused     = errors.New("authentication refused")
	ErrUnknownHostKey  = errors.New("unknown host key")
	ErrChangedHostKey  = errors.New("host key changed")
	ErrUnsupportedHost = errors.New("host not supported")
	ErrDiskFull        = errors.New("disk full on the host")
)

// SSHOptions of Dial.
type SSHOptions struct {
	// Config is the ssh config file (-F); "" is ssh's own (~/.ssh/config).
	Config string
	// AcceptNewHostKey records the key of a host not yet in known_hosts
	// (StrictHostKeyChecking=accept-new); a changed key is refused always.
	AcceptNewHostKey bool
	// Session names the caller in the agent's owner record.
	Session string
	// Heartbeat of the agent's session (see ClientOptions).
	Heartbeat time.Duration
	// Log hears the agent's own lines (its stderr), prefixed with the host.
	Log io.Writer
	// Binary is the ctrperf binary copied to the host; nil is selfbin.Read
	// (the running ctrperf or CTRPERF_SELF_BINARY).
	Binary func() (selfbin.Binary, error)
	// ConnectTimeout bounds the TCP connect (default 10 s); three times
	// it bound the probe of the host, a remote shell that stalls after
	// login (a hung home directory, a profile that waits), and hello.
	ConnectTimeout time.Duration

	// forced is the config file of Dial's ssh calls (withForcedConfig).
	forced string
}

// withForcedConfig writes the ssh config that every ssh of one Dial
// reads: the options ctrperf needs first (the first value ssh obtains
// wins), then the caller's config. A ProxyJump hop gets only -F from
// ssh, not the -o options, so without it a hop is not in batch mode and
// checks its key as the user's config says: it asks on the terminal
// (a background ssh is stopped by SIGTTIN), or refuses a key that
// --accept-new-host-key would record. done removes the file once the
// session is up (ssh reads its config when it starts).
func (o SSHOptions) withForcedConfig() (SSHOptions, func(), error) {
	dir, err := os.MkdirTemp("", "ctrperf-ssh-")
	if err != nil {
		return o, nil, err
	}
	var b strings.Builder
	b.WriteString("# ctrperf: the options of its ssh calls, for every hop (removed once connected)\nHost *\n")
	for _, kv := range o.options() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "  %s %s\n", k, v)
	}
	if o.Config != "" {
		fmt.Fprintf(&b, "Include %s\n", sshdest.ExpandHome(o.Config))
	} else {
		// ssh's own files, which -F replaces.
		fmt.Fprintf(&b, "Include %s\nInclude /etc/ssh/ssh_config\n", sshdest.ExpandHome("~/.ssh/config"))
	}
	path := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return o, nil, err
	}
	o.forced = path
	return o, func() { _ = os.RemoveAll(dir) }, nil
}

// options are the ssh options every call uses.
func (o SSHOptions) options() []string {
	strict := "yes"
	if o.AcceptNewHostKey {
		strict = "accept-new"
	}
	return []string{"BatchMode=yes", "StrictHostKeyChecking=" + strict,
		"ConnectTimeout=" + strconv.Itoa(int(o.connectTimeout().Seconds())),
		"ServerAliveInterval=5", "ServerAliveCountMax=3", "LogLevel=ERROR"}
}

func (o SSHOptions) connectTimeout() time.Duration {
	if o.ConnectTimeout <= 0 {
		return 10 * time.Second
	}
	return o.ConnectTimeout
}

// command is ssh to d running remote, in a process group of its own:
// Ctrl-C in the terminal (SIGINT to the foreground group) or SIGHUP to
// ctrperf's group reach ctrperf, which shuts the sessions down in order,
// and not the ssh clients under it, whose death would cut the agents off
// before their teardown.
func (o SSHOptions) command(ctx context.Context, d plan.Dest, remote string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ssh", o.sshArgs(d, remote)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// CacheDir is where the agent's binary is kept on a host, under its
// user's home: <CacheDir>/<sha256>/ctrperf.
const CacheDir = ".cache/ctrperf/agent"

// Host is a host reached over SSH with its agent running.
type Host struct {
	*Client
	Dest     plan.Dest
	Resolved sshdest.Resolved
	// Arch and Kernel are the host's uname -m and -r.
	Arch, Kernel string
	// Binary is the agent's binary on the host; Copied says this Dial
	// copied it (false: it was there from an earlier one).
	Binary string
	Copied bool
}

// sshCmd is ssh with the options every call uses, then the destination,
// then the remote command.
func (o SSHOptions) sshArgs(d plan.Dest, remote ...string) []string {
	var args []string
	switch {
	case o.forced != "":
		args = append(args, "-F", o.forced)
	case o.Config != "":
		args = append(args, "-F", sshdest.ExpandHome(o.Config))
	}
	// Options on the command line win over the config file's.
	args = append(args, "-T")
	for _, kv := range o.options() {
		args = append(args, "-o", kv)
	}
	args = append(args, d.SSHArgs()...)
	return append(args, remote...)
}

// Dial reaches d over SSH, makes sure the host can run this ctrperf
// (architecture, kernel), copies the binary there once (by content hash),
// starts `ctrperf agent` and says hello.
func Dial(ctx context.Context, d plan.Dest, o SSHOptions) (*Host, error) {
	if d.Local() {
		return nil, errors.New("remote: this machine is no SSH destination")
	}
	res, err := sshdest.Resolve(ctx, o.Config, d)
	if err != nil {
		return nil, err
	}
	h := &Host{Dest: d, Resolved: res}
	o, done, err := o.withForcedConfig()
	if err != nil {
		return nil, fmt.Errorf("ssh config for %s: %w", d.Raw, err)
	}
	defer done()
	read := o.Binary
	if read == nil {
		read = selfbin.Read
	}
	bin, err := read()
	if err != nil {
		return nil, err
	}
	if bin.Interp != "" {
		return nil, fmt.Errorf("%w: %s: the ctrperf binary %s is dynamically linked (%s); a host gets a static one (make build: CGO_ENABLED=0)", ErrUnsupportedHost, d.Raw, bin.Path, bin.Interp)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*o.connectTimeout())
	path, present, err := h.probe(pctx, o, bin.Hash)
	cancel()
	if errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%s: no answer to the probe (uname) within %s: a remote shell that stalls after login? (try: ssh %s true): %w", d.Raw, 3*o.connectTimeout(), d.Raw, pctx.Err())
	}
	if err != nil {
		return nil, err
	}
	h.Binary = path
	if !present {
		if err := h.install(ctx, o, bin); err != nil {
			return nil, err
		}
		h.Copied = true
	}
	if h.Client, err = h.start(ctx, o, bin.Hash); err != nil {
		return nil, err
	}
	return h, nil
}

// run runs one remote command (stdin in) and maps ssh's failures.
func (h *Host) run(ctx context.Context, o SSHOptions, stdin io.Reader, remote string) ([]byte, error) {
	cmd := o.command(ctx, h.Dest, remote)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.Bytes(), h.explain(err, stderr.String(), o)
	}
	return stdout.Bytes(), nil
}

// probe reads the host's architecture, kernel and home, and whether the
// binary of hash is cached there.
func (h *Host) probe(ctx context.Context, o SSHOptions, hash string) (string, bool, error) {
	script := `uname -s; uname -m; uname -r; printf '%s\n' "$HOME"; if [ -x "$HOME/` + CacheDir + `/` + hash + `/ctrperf" ]; then echo present; else echo absent; fi`
	out, err := h.run(ctx, o, nil, script)
	if err != nil {
		return "", false, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 5 {
		return "", false, fmt.Errorf("%s: unexpected answer to uname (a login banner or a shell that is not sh?): %q", h.Dest.Raw, out)
	}
	sys, arch, kernel, home, state := lines[0], lines[1], lines[2], lines[3], lines[4]
	h.Arch, h.Kernel = arch, kernel
	if why := Unsupported(sys, arch, kernel, runtime.GOARCH); why != "" {
		return "", false, fmt.Errorf("%w: %s: %s", ErrUnsupportedHost, h.Dest.Raw, why)
	}
	return home + "/" + CacheDir + "/" + hash + "/ctrperf", state == "present", nil
}

// Unsupported says why this ctrperf (built for goarch) cannot run on a host
// with uname -s, -m and -r as given; "" when it can.
func Unsupported(sys, arch, kernel, goarch string) string {
	if sys != "Linux" {
		return fmt.Sprintf("it runs %s; ctrperf runs on Linux only", sys)
	}
	want := map[string][]string{"amd64": {"x86_64"}, "arm64": {"aarch64", "arm64"}, "386": {"i386", "i686"},
		"arm": {"armv7l", "armv6l"}, "riscv64": {"riscv64"}, "ppc64le": {"ppc64le"}, "s390x": {"s390x"}}[goarch]
	ok := false
	for _, w := range want {
		ok = ok || w == arch
	}
	if !ok {
		return fmt.Sprintf("its architecture is %s and this ctrperf is built for %s (GOARCH=%s): build one for %s", arch, strings.Join(want, "/"), goarch, arch)
	}
	major, minor := kernelVersion(kernel)
	if major < 3 || (major == 3 && minor < 10) {
		return fmt.Sprintf("its kernel %s is older than 3.10, the oldest ctrperf runs on (cgroups, Go's runtime)", kernel)
	}
	return ""
}

func kernelVersion(r string) (int, int) {
	parts := strings.SplitN(r, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(strings.TrimRightFunc(parts[1], func(c rune) bool { return c < '0' || c > '9' }))
	return major, minor
}

// install copies the binary to the host's cache: written under a
// temporary name, checked against its hash, made executable and renamed,
// so a half-copied binary is never run.
func (h *Host) install(ctx context.Context, o SSHOptions, bin selfbin.Binary) error {
	dir := strings.TrimSuffix(h.Binary, "/ctrperf")
	script := `set -e; umask 022; d='` + dir + `'; mkdir -p "$d"; t="$d/.ctrperf.$$"; trap 'rm -f "$t"' EXIT; cat > "$t"; ` +
		`h=$(sha256sum "$t" | cut -d' ' -f1); if [ "$h" != '` + bin.Hash + `' ]; then echo "ctrperf: the copy's sha256 is $h" >&2; exit 3; fi; ` +
		`chmod 0755 "$t"; mv -f "$t" "$d/ctrperf"; trap - EXIT`
	if _, err := h.run(ctx, o, bytes.NewReader(bin.Data), script); err != nil {
		return fmt.Errorf("copy ctrperf to %s:%s: %w", h.Dest.Raw, h.Binary, err)
	}
	return nil
}

// start runs the agent over an SSH session and says hello.
func (h *Host) start(ctx context.Context, o SSHOptions, build string) (*Client, error) {
	// Not ctx's: the session outlives Dial; Close ends it.
	cmd := o.command(context.Background(), h.Dest, h.Binary+" agent")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tail{prefix: h.Dest.Raw + ": ", log: o.Log}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	p := &sshProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	// The build on hello: the binary at h.Binary is named by its hash but
	// may have been replaced since it was copied.
	c, err := NewClient(ctx, stdout, stdin, ClientOptions{Name: h.Dest.Raw, Session: o.Session, Heartbeat: o.Heartbeat, Closer: p,
		Build: build, HelloTimeout: 3 * o.connectTimeout(),
		Fix: fmt.Sprintf("remove %s on %s (ssh %s rm -f %s) and ctrperf copies it again", h.Binary, h.Dest.Raw, h.Dest.Raw, h.Binary)})
	if err != nil {
		_ = p.Close()
		if ee := h.explain(p.err, stderr.String(), o); ee != nil && p.err != nil {
			return nil, ee
		}
		return nil, fmt.Errorf("start the agent on %s: %w (ssh said: %s)", h.Dest.Raw, err, strings.TrimSpace(stderr.String()))
	}
	return c, nil
}

// sshProcess is the ssh client process of an agent session.
type sshProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	err    error
	once   sync.Once
}

// Close ends the session: stdin closed (the agent sees the end of its
// stream), then ssh given a few seconds before it is killed.
func (p *sshProcess) Close() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
	})
	return nil
}

// PID is the ssh client's process id (tests cut the connection with it).
func (h *Host) PID() int {
	if p, ok := h.Client.closer.(*sshProcess); ok && p.cmd.Process != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// tail keeps the last lines of the agent's stderr and passes them on.
type tail struct {
	prefix string
	log    io.Writer
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if t.buf.Len() > 8<<10 {
		t.buf.Next(t.buf.Len() - 8<<10)
	}
	if t.log != nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fmt.Fprintf(t.log, "%s%s\n", t.prefix, sc.Text())
		}
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// explain turns ssh's failure into an error that says what happened and
// what to do. ssh exits 255 for its own errors; anything else is the
// remote command's status.
func (h *Host) explain(err error, stderr string, o SSHOptions) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(stderr)
	name := h.Dest.Raw
	where := h.Resolved.Dest()
	known := strings.Join(h.Resolved.UserKnownHostsFiles, ", ")
	if known == "" {
		known = "~/.ssh/known_hosts"
	}
	switch {
	case strings.Contains(msg, "REMOTE HOST IDENTIFICATION HAS CHANGED") || strings.Contains(msg, "Host key for") && strings.Contains(msg, "has changed"):
		return fmt.Errorf("%w: %s (%s): its host key is not the one recorded in %s, and ctrperf never connects to such a host (a reinstalled host or someone in between); if you know why it changed, remove the old key with `ssh-keygen -f %s -R %s` and connect again: %w",
			ErrChangedHostKey, name, where, known, firstOf(h.Resolved.UserKnownHostsFiles, "~/.ssh/known_hosts"), h.Resolved.HostName,
			sshErr(keepLines(msg, "fingerprint", "SHA256:", "Offending", "has changed")))
	case strings.Contains(msg, "Host key verification failed") || strings.Contains(msg, "host key is known for") || strings.Contains(msg, "No matching host key"):
		return fmt.Errorf("%w: %s (%s): its host key is not in %s; check the key's fingerprint and add it (ssh-keyscan, or one interactive ssh), or run with --accept-new-host-key to record it on first use: %w",
			ErrUnknownHostKey, name, where, known, sshErr(msg))
	case strings.Contains(msg, "Permission denied") || strings.Contains(msg, "Too many authentication failures"):
		return fmt.Errorf("%w: %s (%s) refused the login of %s (keys offered: %s; ctrperf logs in with keys or an agent only, BatchMode): %w",
			ErrAuthRefused, name, where, h.Resolved.User, strings.Join(h.Resolved.IdentityFiles, ", "), sshErr(msg))
	case strings.Contains(msg, "Connection refused") || strings.Contains(msg, "No route to host") || strings.Contains(msg, "timed out") ||
		strings.Contains(msg, "Could not resolve hostname") || strings.Contains(msg, "Network is unreachable") || strings.Contains(msg, "Connection closed by") && strings.Contains(msg, "port"):
		return fmt.Errorf("%w: %s (%s): %w", ErrUnreachable, name, where, sshErr(msg))
	case strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded"):
		return fmt.Errorf("%w: %s: %w", ErrDiskFull, name, sshErr(msg))
	}
	if msg == "" {
		return fmt.Errorf("ssh %s: %w", name, err)
	}
	return fmt.Errorf("ssh %s: %w: %s", name, err, msg)
}

// keepLines are the lines of ssh's message that say something (its
// changed-key warning is a banner of 15 lines).
func keepLines(msg string, with ...string) string {
	var keep []string
	for _, l := range strings.Split(msg, "\n") {
		for _, w := range with {
			if strings.Contains(l, w) {
				keep = append(keep, strings.TrimSpace(l))
				break
			}
		}
	}
	if len(keep) == 0 {
		return msg
	}
	return strings.Join(keep, "\n")
}

func firstOf(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// sshErr is ssh's own message, for the end of an explained error.
type sshErr string

func (e sshErr) Error() string { return "ssh said: " + strings.ReplaceAll(string(e), "\n", "; ") }
