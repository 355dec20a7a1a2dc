package vm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// dockerModulesList is the initramfs's list of dockerModules, which the
// guest's init loads when the kernel command line asks for dockerd.
const dockerModulesList = "/docker-modules.list"

// guestModules are what the guest's init loads before it mounts its root
// disk and opens its agent port, by name: its disk (virtio_blk, ext4 and
// the checksum ext4 asks for), its agent port (virtio_console) and its
// network (virtio_net), and the data directory of disk: virtiofs
// (virtiofs), all modules in Debian's kernel. Their dependencies come
// from modules.dep.
var guestModules = []string{"crc32c_generic", "crc32c-intel", "ext4", "virtio_pci", "virtio_blk", "virtio_console", "virtio_net", "virtiofs"}

// dockerModules are what a guest's dockerd needs of its kernel, loaded
// only in a guest with Docker (docker-modules.list): its storage driver
// (overlay), its bridge network (bridge, br_netfilter, veth) and its
// iptables rules, which Debian's iptables writes through nf_tables
// (nft_compat for the xt matches and targets Docker's and ctrperf's
// rules use). The guest's disk has no modules: they are in the initramfs.
var dockerModules = []string{"overlay", "bridge", "br_netfilter", "veth", "nf_tables", "nft_compat", "nft_chain_nat",
	"xt_addrtype", "xt_conntrack", "xt_MASQUERADE", "xt_comment", "xt_tcpudp", "xt_nat", "xt_mark"}

// optionalModules may fail to load without stopping the boot: crc32c-intel
// needs SSE 4.2, which an emulated CPU may lack (crc32c_generic serves);
// virtiofs and its fuse only a guest with disk: virtiofs needs (its init
// then fails at the mount, saying why); dockerModules only a guest's
// dockerd, which says what it lacks (another kernel may have them built
// in).
var optionalModules = func() map[string]bool {
	m := map[string]bool{"crc32c-intel": true, "fuse": true, "virtiofs": true}
	for _, d := range dockerModules {
		m[d] = true
	}
	return m
}()

// parseModulesDep reads modules.dep: each module's path and its
// dependencies' paths, relative to the modules directory.
func parseModulesDep(r io.Reader) (map[string][]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// moduleName is a module's name from its path ("kernel/fs/ext4/ext4.ko" →
// "ext4").
func moduleName(p string) string {
	b := path.Base(p)
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(b, ext) {
			return strings.TrimSuffix(b, ext)
		}
	}
	return b
}

// loadOrder is the modules to load for names, each after its
// dependencies, each once: their paths relative to the modules directory.
func loadOrder(deps map[string][]string, names []string) ([]string, error) {
	byName := map[string]string{}
	for p := range deps {
		byName[moduleName(p)] = p
	}
	var order []string
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		ds := deps[p]
		// modprobe loads the last dependency first.
		for i := len(ds) - 1; i >= 0; i-- {
			visit(ds[i])
		}
		order = append(order, p)
	}
	for _, n := range names {
		p, ok := byName[n]
		if !ok {
			if optionalModules[n] {
				continue
			}
			return nil, fmt.Errorf("module %s is not in modules.dep (is it built in? then the guest needs no module)", n)
		}
		visit(p)
	}
	return order, nil
}

// initramfs is the guest's first filesystem: ctrperf as /ctrperf (the
// init, and the agent's binary), the modules of guestModules under
// lib/modules/<version>, and their load order in modules.list (one path a
// line; a line starting with "?" may fail); the modules of dockerModules
// that guestModules lack too, their order in docker-modules.list.
type initramfs struct {
	self   string // this ctrperf's binary
	kernel Kernel
	order  []string
	docker []string
}

func newInitramfs(self string, k Kernel) (*initramfs, error) {
	f, err := os.Open(filepath.Join(k.Modules, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps, err := parseModulesDep(f)
	if err != nil {
		return nil, fmt.Errorf("%s/modules.dep: %w", k.Modules, err)
	}
	order, err := loadOrder(deps, guestModules)
	if err != nil {
		return nil, err
	}
	docker, err := loadOrder(deps, dockerModules)
	if err != nil {
		return nil, err
	}
	docker = slices.DeleteFunc(docker, func(p string) bool { return slices.Contains(order, p) })
	return &initramfs{self: self, kernel: k, order: order, docker: docker}, nil
}

// modulesList is modules.list's content.
func (r *initramfs) modulesList() string { return r.list(r.order, false) }

// dockerList is docker-modules.list's content: every line optional (a
// dependency too), so that a guest boots whatever its dockerd lacks and
// dockerd says what that is.
func (r *initramfs) dockerList() string { return r.list(r.docker, true) }

// list is a list file's content: the modules of order.
func (r *initramfs) list(order []string, optional bool) string {
	var b strings.Builder
	for _, p := range order {
		if optional || optionalModules[moduleName(p)] {
			b.WriteString("?")
		}
		b.WriteString(path.Join("/lib/modules", r.kernel.Version, p) + "\n")
	}
	return b.String()
}

// hash is the initramfs's recipe: the binary's and modules' bytes and
// the list, so that a rebuilt ctrperf or another kernel makes another.
func (r *initramfs) hash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "ctrperf initramfs 1\n%s\n%s\n", r.modulesList(), r.dockerList())
	for _, f := range append([]string{r.self}, r.files()...) {
		in, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, in)
		in.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (r *initramfs) files() []string {
	var out []string
	for _, p := range append(slices.Clone(r.order), r.docker...) {
		out = append(out, filepath.Join(r.kernel.Modules, p))
	}
	return out
}

// write writes the initramfs as a newc cpio archive (uncompressed: the
// kernel unpacks it at once, and the binary barely compresses).
func (r *initramfs) write(w io.Writer) error {
	c := &cpioWriter{w: w}
	dirs := map[string]bool{}
	mkdirs := func(p string) {
		var parts []string
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if !dirs[d] {
				dirs[d] = true
				c.dir(d)
			}
		}
	}
	for _, d := range []string{"dev", "proc", "sys", "newroot"} {
		mkdirs(d + "/x")
		dirs[d] = true
		c.dir(d)
	}
	c.charDev("dev/console", 0o600, 5, 1)
	if err := c.file("ctrperf", 0o755, r.self); err != nil {
		return err
	}
	for _, p := range append(slices.Clone(r.order), r.docker...) {
		dst := path.Join("lib/modules", r.kernel.Version, p)
		mkdirs(dst)
		if err := c.file(dst, 0o644, filepath.Join(r.kernel.Modules, p)); err != nil {
			return err
		}
	}
	c.data("modules.list", 0o644, []byte(r.modulesList()))
	c.data(dockerModulesList[1:], 0o644, []byte(r.dockerList()))
	c.trailer()
	return c.err
}

// cpioWriter writes the newc format the kernel unpacks (an 110-byte ASCII
// header per entry, name and data each padded to 4 bytes).
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor int) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.write([]byte(h + name + "\x00"))
	c.pad(int64(len(h) + len(name) + 1))
}

func (c *cpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *cpioWriter) pad(n int64) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0, 0, 0) }

func (c *cpioWriter) charDev(name string, perm uint32, major, minor int) {
	c.header(name, 0o020000|perm, 0, major, minor)
}

func (c *cpioWriter) data(name string, perm uint32, b []byte) {
	c.header(name, 0o100000|perm, int64(len(b)), 0, 0)
	c.write(b)
	c.pad(int64(len(b)))
}

func (c *cpioWriter) file(name string, perm uint32, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	c.header(name, 0o100000|perm, fi.Size(), 0, 0)
	if c.err == nil {
		var n int64
		n, c.err = io.Copy(c.w, f)
		if c.err == nil && n != fi.Size() {
			c.err = fmt.Errorf("%s changed while it was copied", src)
		}
	}
	c.pad(fi.Size())
	return c.err
}

func (c *cpioWriter) trailer() { c.header("TRAILER!!!", 0, 0, 0, 0) }
