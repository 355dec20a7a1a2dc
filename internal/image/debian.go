package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
)

// Base is a Debian root filesystem made by debootstrap and imported as an
// image. Its recipe hash covers suite, variant, mirror, architecture and
// package list; the image is tagged <Repo>:<hash> and <Repo>:latest.
type Base struct {
	Name     string   // recipe name ("debian-base")
	Repo     string   // repository, e.g. "ctrperf/debian-base"
	Suite    string   // "bookworm"
	Variant  string   // debootstrap --variant ("minbase")
	Packages []string // --include
	// Mirror is the Debian mirror; "" uses the one apt's sources name for
	// Suite, so the build reaches no host this machine does not already use.
	Mirror string
}

// DebianBase is the image every non-Go workload runs in: the servers and
// load tools the seed experiments used, and the examples' Redis and
// PostgreSQL with their clients, on Debian bookworm.
var DebianBase = Base{
	Name:    "debian-base",
	Repo:    "ctrperf/debian-base",
	Suite:   "bookworm",
	Variant: "minbase",
	Packages: []string{
		"bonnie++", "ca-certificates", "fio", "iproute2", "mariadb-server", "memcached",
		"procps", "stress-ng", "sysbench",
		// examples/redis and examples/postgres: the app in a container
		// and its client (redis-benchmark; pgbench is in postgresql-15)
		"postgresql", "redis-server", "redis-tools",
	},
}

// GuestDocker is the root filesystem of a VM guest that runs Docker
// (runtime vm with vm.docker: seed 003's "container in a VM"): Debian's
// docker.io (dockerd, containerd, runc) and iptables on the same suite as
// DebianBase, and what ctrperf's agent reads in the guest (procps,
// iproute2). Never imported as an image: internal/vm makes the guest's
// disk of its tarball (BaseTarball). It holds no workload programs: the
// guest's services run in containers of the images shipped into it.
var GuestDocker = Base{
	Name:     "debian-docker",
	Repo:     "ctrperf/debian-docker",
	Suite:    DebianBase.Suite,
	Variant:  DebianBase.Variant,
	Packages: []string{"ca-certificates", "docker.io", "iproute2", "iptables", "procps"},
}

// Ref is the reference to deploy: <Repo>:latest.
func (b Base) Ref() string { return b.Repo + ":latest" }

// ErrMirrorUnreachable is wrapped by a base build that could not download
// Debian's packages.
var ErrMirrorUnreachable = errors.New("mirror unreachable")

// DefaultCacheDir holds the base image's rootfs tarball unless
// CTRPERF_CACHE_DIR names another directory.
const DefaultCacheDir = "/var/cache/ctrperf"

func cacheDir(o options) string {
	if o.cacheDir != "" {
		return o.cacheDir
	}
	return CacheDir()
}

// CacheDir is where the base image's rootfs tarball is kept:
// $CTRPERF_CACHE_DIR, or DefaultCacheDir.
func CacheDir() string {
	if d := os.Getenv("CTRPERF_CACHE_DIR"); d != "" {
		return d
	}
	return DefaultCacheDir
}

// baseHash is the recipe hash of a base image with its mirror resolved.
func baseHash(b Base, mirror, arch string) string {
	pkgs := append([]string(nil), b.Packages...)
	sort.Strings(pkgs)
	var h hasher
	h.add("kind", "debootstrap")
	h.add("suite", b.Suite)
	h.add("variant", b.Variant)
	h.add("mirror", mirror)
	h.add("arch", arch)
	h.add("packages", strings.Join(pkgs, ","))
	return h.sum()
}

// debArch is Debian's name for the architecture this program runs on.
func debArch() string {
	switch runtime.GOARCH {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	default: // amd64, arm64, ppc64le, s390x, riscv64 have the same names
		return runtime.GOARCH
	}
}

// mirror returns b.Mirror or the one apt's sources name for b.Suite.
func (b Base) mirror(aptRoot string) (string, error) {
	if b.Mirror != "" {
		return b.Mirror, nil
	}
	src, err := aptSources(aptRoot)
	if err != nil {
		return "", err
	}
	m, err := debianMirror(src, b.Suite)
	if err != nil {
		return "", fmt.Errorf("%w (in %s): set a mirror or name your own image with --base-image / CTRPERF_BASE_IMAGE", err, filepath.Join(aptRoot, "etc/apt/sources.list*"))
	}
	return m, nil
}

// BaseHash returns the recipe hash b would be built with here.
func BaseHash(b Base, opts ...Option) (string, error) {
	o := buildOptions(opts)
	m, err := b.mirror(o.aptRoot)
	if err != nil {
		return "", err
	}
	return baseHash(b, m, debArch()), nil
}

// BuildBase makes b exist on the engine: nothing when <Repo>:<hash> is there,
// an import when the rootfs tarball of this hash is in the cache directory
// (seconds), else debootstrap into the cache directory first (about 90 s).
// Concurrent builds on one machine wait for each other through a lock file.
func BuildBase(ctx context.Context, api API, b Base, opts ...Option) (Result, error) {
	o := buildOptions(opts)
	res := Result{Name: b.Name, Ref: b.Ref()}
	mirror, err := b.mirror(o.aptRoot)
	if err != nil {
		return res, fmt.Errorf("image %s: %w", b.Name, err)
	}
	res.Hash = baseHash(b, mirror, debArch())
	hashRef := b.Repo + ":" + res.Hash

	if !o.force {
		if id, err := currentBase(ctx, api, res.Hash, hashRef, res.Ref); err != nil {
			return res, err
		} else if id != "" {
			res.ID, res.Action = id, ActionCached
			return res, nil
		}
	}

	dir := cacheDir(o)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("image %s: cache directory: %w", b.Name, err)
	}
	tarball := filepath.Join(dir, b.Name+"-"+res.Hash+".tar")
	unlock, err := lockFile(ctx, filepath.Join(dir, b.Name+".lock"), o.progress)
	if err != nil {
		return res, fmt.Errorf("image %s: %w", b.Name, err)
	}
	defer unlock()
	// Another process may have imported it while this one waited.
	if !o.force {
		if id, err := currentBase(ctx, api, res.Hash, hashRef, res.Ref); err != nil {
			return res, err
		} else if id != "" {
			res.ID, res.Action = id, ActionCached
			return res, nil
		}
	}

	res.Action = ActionImported
	if built, err := ensureTarball(ctx, b, mirror, dir, tarball, o); err != nil {
		return res, fmt.Errorf("image %s: %w", b.Name, err)
	} else if built {
		res.Action = ActionBuilt
	}
	start := time.Now()
	id, err := importTarball(ctx, api, tarball, hashRef, imageLabels(b.Name, res.Hash, o.labels), o.progress)
	if err != nil {
		return res, fmt.Errorf("image %s: %w", b.Name, err)
	}
	if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: hashRef, Target: res.Ref}); err != nil {
		return res, fmt.Errorf("tag %s as %s: %w", hashRef, res.Ref, err)
	}
	fmt.Fprintf(o.progress, "%s: imported %s in %s\n", b.Name, hashRef, time.Since(start).Round(100*time.Millisecond))
	res.ID = id
	return res, nil
}

// ensureTarball makes b's rootfs tarball unless the cache has it (or
// force), under the caller's lock; built says whether it ran debootstrap.
func ensureTarball(ctx context.Context, b Base, mirror, dir, tarball string, o options) (built bool, err error) {
	if _, err := os.Stat(tarball); err == nil && !o.force {
		return false, nil
	}
	start := time.Now()
	if err := debootstrapTarball(ctx, b, mirror, dir, tarball, o.progress); err != nil {
		return false, err
	}
	fmt.Fprintf(o.progress, "%s: rootfs tarball %s ready after %s\n", b.Name, tarball, time.Since(start).Round(time.Second))
	removeOtherTarballs(dir, b.Name, tarball)
	return true, nil
}

// BaseTarball is b's rootfs tarball in the cache directory and its recipe
// hash, made by debootstrap when missing (never imported into an engine):
// what a VM guest's disk is made of. Concurrent makers wait for each
// other through the lock file BuildBase takes too.
func BaseTarball(ctx context.Context, b Base, opts ...Option) (tarball, hash string, err error) {
	o := buildOptions(opts)
	mirror, err := b.mirror(o.aptRoot)
	if err != nil {
		return "", "", fmt.Errorf("rootfs %s: %w", b.Name, err)
	}
	hash = baseHash(b, mirror, debArch())
	dir := cacheDir(o)
	tarball = filepath.Join(dir, b.Name+"-"+hash+".tar")
	if _, err := os.Stat(tarball); err == nil && !o.force {
		return tarball, hash, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("rootfs %s: cache directory: %w", b.Name, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, b.Name+".lock"), o.progress)
	if err != nil {
		return "", "", fmt.Errorf("rootfs %s: %w", b.Name, err)
	}
	defer unlock()
	if _, err := ensureTarball(ctx, b, mirror, dir, tarball, o); err != nil {
		return "", "", fmt.Errorf("rootfs %s: %w", b.Name, err)
	}
	return tarball, hash, nil
}

// currentBase returns the ID of the engine's base image when one of its two
// tags carries the recipe hash (an image copied from another engine may
// have only :latest), after giving it both tags; "" when there is none.
func currentBase(ctx context.Context, api API, hash string, refs ...string) (string, error) {
	for _, ref := range refs {
		img, h, found, err := existing(ctx, api, ref)
		if err != nil {
			return "", err
		}
		if !found || h != hash {
			continue
		}
		for _, other := range refs {
			if other != ref {
				if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: other}); err != nil {
					return "", fmt.Errorf("tag %s as %s: %w", ref, other, err)
				}
			}
		}
		return img.ID, nil
	}
	return "", nil
}

// importTarball streams a rootfs tarball into the engine's image import.
func importTarball(ctx context.Context, api API, tarball, ref string, labels map[string]string, progress io.Writer) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("import %s: %w", tarball, err)
	}
	defer f.Close()
	body, err := api.ImageImport(ctx, client.ImageImportSource{Source: f, SourceName: "-"}, ref, client.ImageImportOptions{
		Message: "ctrperf: debootstrap rootfs " + filepath.Base(tarball),
		Changes: importChanges(labels),
	})
	if err != nil {
		return "", fmt.Errorf("import %s as %s: %w", tarball, ref, err)
	}
	defer body.Close()
	if err := readMessages(body, io.Discard); err != nil {
		return "", fmt.Errorf("import %s as %s: %w", tarball, ref, err)
	}
	img, _, found, err := existing(ctx, api, ref)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("import %s: the engine reported success but has no image %s", tarball, ref)
	}
	return img.ID, nil
}

// importChanges are the Dockerfile instructions applied at import: the
// labels, a PATH (an imported rootfs has no environment) and a shell as the
// default command.
func importChanges(labels map[string]string) []string {
	ch := []string{
		`ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
		`CMD ["/bin/bash"]`,
	}
	for _, k := range sortedKeys(labels) {
		ch = append(ch, fmt.Sprintf("LABEL %s=%q", k, labels[k]))
	}
	return ch
}

// debootstrapTarball runs debootstrap into dir and packs the result as
// tarball (written under a temporary name and renamed, so a tarball in the
// cache is always complete).
func debootstrapTarball(ctx context.Context, b Base, mirror, dir, tarball string, progress io.Writer) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap is not installed: run `make bootstrap` (or apt-get install debootstrap), or name your own image with --base-image / CTRPERF_BASE_IMAGE")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("debootstrap needs root: run as root, or name your own image with --base-image / CTRPERF_BASE_IMAGE")
	}
	rootfs := strings.TrimSuffix(tarball, ".tar") + ".rootfs"
	if err := removeRootfs(rootfs); err != nil {
		return err
	}
	defer removeRootfs(rootfs)

	fmt.Fprintf(progress, "%s: debootstrap %s (%s) from %s into %s; about 90 s\n", b.Name, b.Suite, b.Variant, mirror, rootfs)
	args := []string{"--variant=" + b.Variant, "--arch=" + debArch(), "--components=main"}
	if len(b.Packages) > 0 {
		args = append(args, "--include="+strings.Join(b.Packages, ","))
	}
	args = append(args, b.Suite, rootfs, mirror)
	cmd := exec.CommandContext(ctx, "debootstrap", args...)
	// debootstrap is a shell script whose pipelines run in subshells that
	// outlive a signal to the script itself, so it runs in a process group
	// of its own and an interruption signals the whole group: SIGTERM, then
	// SIGKILL for what is left. removeRootfs then unmounts what it mounted.
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	var killLater *time.Timer
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		killLater = time.AfterFunc(5*time.Second, func() { unix.Kill(-pgid, unix.SIGKILL) })
		return unix.Kill(-pgid, unix.SIGTERM)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start debootstrap: %w", err)
	}
	tail := followDebootstrap(out, progress, b.Name, time.Now())
	err = cmd.Wait()
	if ctx.Err() != nil {
		if killLater != nil {
			killLater.Stop()
		}
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL) // stragglers of the group, if any
		return fmt.Errorf("debootstrap interrupted (%w); its partial root filesystem is removed", ctx.Err())
	}
	if err != nil {
		return debootstrapError(mirror, err, tail)
	}

	// What debootstrap downloaded is not part of the image.
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, glob))
		for _, m := range matches {
			os.Remove(m)
		}
	}
	tmp := tarball + ".tmp"
	fmt.Fprintf(progress, "%s: packing %s\n", b.Name, tarball)
	pack := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", rootfs, "-cf", tmp, ".")
	if msg, err := pack.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tar %s: %w: %s", rootfs, err, strings.TrimSpace(string(msg)))
	}
	if err := os.Rename(tmp, tarball); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache tarball: %w", err)
	}
	return nil
}

// followDebootstrap prints one progress line whenever debootstrap moves to a
// new phase (Retrieving, Extracting, Unpacking, Configuring...) instead of
// one per package, plus a heartbeat when a phase runs long, and returns the
// last lines for error messages.
func followDebootstrap(r io.Reader, progress io.Writer, name string, start time.Time) []string {
	var tail []string
	phase, lastPrint := "", time.Now()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		tail = append(tail, line)
		if len(tail) > 20 {
			tail = tail[1:]
		}
		p := debootstrapPhase(line)
		if p == "" || (p == phase && time.Since(lastPrint) < 20*time.Second) {
			continue
		}
		phase, lastPrint = p, time.Now()
		fmt.Fprintf(progress, "%s: [%3.0fs] %s\n", name, time.Since(start).Seconds(), strings.TrimPrefix(line, "I: "))
	}
	return tail
}

// debootstrapPhase names the phase an "I: Verb ..." line belongs to, "" for
// other lines. Retrieving and Validating alternate for every package, so they
// are one phase.
func debootstrapPhase(line string) string {
	rest, ok := strings.CutPrefix(line, "I: ")
	if !ok {
		return ""
	}
	verb, _, _ := strings.Cut(rest, " ")
	if verb == "Validating" {
		return "Retrieving"
	}
	return verb
}

// debootstrapError turns a failed debootstrap into an error that says what
// to do. Download failures wrap ErrMirrorUnreachable.
func debootstrapError(mirror string, err error, tail []string) error {
	out := strings.Join(tail, "\n")
	for _, sign := range []string{
		"Failed getting release file", "Failed getting release signature file",
		"Couldn't download", "unable to resolve host", "Temporary failure in name resolution",
		"Connection refused", "Network is unreachable", "Connection timed out", "No route to host",
	} {
		if strings.Contains(out, sign) {
			return fmt.Errorf("could not reach the Debian mirror %s: %w (%s); check network/proxy; or name your own image with --base-image / CTRPERF_BASE_IMAGE\n%s", mirror, ErrMirrorUnreachable, sign, out)
		}
	}
	return fmt.Errorf("debootstrap from %s failed: %w\n%s", mirror, err, out)
}

// removeRootfs removes a debootstrap target, first unmounting whatever a
// killed debootstrap left mounted inside it (proc, sys), so that RemoveAll
// never walks into a live /proc or /sys.
func removeRootfs(rootfs string) error {
	if f, err := os.Open(kernel.SelfMountinfo(kernel.ProcMount)); err == nil {
		points, perr := mountsUnder(f, rootfs)
		f.Close()
		if perr != nil {
			return fmt.Errorf("read mounts under %s: %w", rootfs, perr)
		}
		for _, p := range points {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s (left by debootstrap): %w", p, err)
			}
		}
	}
	if err := os.RemoveAll(rootfs); err != nil {
		return fmt.Errorf("remove debootstrap target %s: %w", rootfs, err)
	}
	return nil
}

// mountsUnder returns the mount points below dir listed in a mountinfo
// stream, deepest first so that they can be unmounted in order.
func mountsUnder(r io.Reader, dir string) ([]string, error) {
	mounts, err := kernel.ParseMountinfo(r)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range kernel.MountsUnder(mounts, dir) {
		if p != filepath.Clean(dir) { // the target itself is no leftover of debootstrap
			out = append(out, p)
		}
	}
	return out, nil
}

// removeOtherTarballs drops tarballs of older recipes of the same image.
func removeOtherTarballs(dir, name, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, name+"-*.tar"))
	for _, p := range old {
		if p != keep {
			os.Remove(p)
		}
	}
}

// lockFile takes an exclusive flock on path, waiting while another process
// holds it (e.g. two test binaries both ensuring the base image).
func lockFile(ctx context.Context, path string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	said := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !said {
			fmt.Fprintf(progress, "waiting for another ctrperf process building this image (lock %s)\n", path)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
