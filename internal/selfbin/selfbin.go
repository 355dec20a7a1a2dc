// Package selfbin finds the ctrperf binary that holds the programs ctrperf
// deploys (ticketd, as the hidden command `ctrperf __ticketd`), so that
// images and bare-metal runs need neither the source tree nor a Go
// toolchain: an image gets a copy of this binary, a host run executes it.
// A static binary (CGO_ENABLED=0, `make build`) runs FROM scratch as it is;
// one built with cgo (plain `go build` where a C compiler is installed)
// takes its loader and libraries along (Runtime).
//
// It is the running executable, unless CTRPERF_SELF_BINARY names another
// one (test binaries are not ctrperf and, built with -race, not static
// either: tests point it at a static ctrperf they built).
package selfbin

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Env names the ctrperf binary to use instead of the running one.
const Env = "CTRPERF_SELF_BINARY"

// Ticketd is the hidden command of ctrperf that runs the web workload's
// server: `ctrperf __ticketd FLAGS...` takes ticketd's own flags.
const Ticketd = "__ticketd"

// Idle is the hidden command that waits for SIGTERM or SIGINT and exits 0:
// the main process of a container that ctrperf only runs commands in (the
// kv workload's client container runs `ctrperf load` there by exec).
const Idle = "__idle"

// Path returns the absolute path of the ctrperf binary: $CTRPERF_SELF_BINARY
// or the running executable, symlinks resolved.
func Path() (string, error) {
	p := os.Getenv(Env)
	from := Env
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the ctrperf binary: %w", err)
		}
		p, from = exe, "the running executable"
		if strings.HasSuffix(exe, ".test") {
			// A test binary would run its tests, not a hidden command.
			return "", fmt.Errorf("the running executable %s is a test binary, not ctrperf: set %s (testenv.Ctrperf builds one)", exe, Env)
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("ctrperf binary %s (%s): %w", p, from, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("ctrperf binary %s (%s): %w", abs, from, err)
	}
	return abs, nil
}

// Binary is the ctrperf binary's content.
type Binary struct {
	Path string
	Data []byte
	Hash string // sha256, hex
	// Interp is the dynamic loader a binary built with cgo needs ("" for
	// a static one, which runs FROM scratch as it is).
	Interp string
}

var cache struct {
	sync.Mutex
	path string
	mod  int64
	size int64
	bin  Binary
}

// Read returns the ctrperf binary's bytes, read once per process while
// the file stays the same.
func Read() (Binary, error) {
	p, err := Path()
	if err != nil {
		return Binary{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return Binary{}, fmt.Errorf("ctrperf binary: %w", err)
	}
	cache.Lock()
	defer cache.Unlock()
	if cache.path == p && cache.mod == st.ModTime().UnixNano() && cache.size == st.Size() {
		return cache.bin, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return Binary{}, fmt.Errorf("read the ctrperf binary: %w", err)
	}
	interp, err := interpreter(data)
	if err != nil {
		return Binary{}, fmt.Errorf("ctrperf binary %s: %w", p, err)
	}
	sum := sha256.Sum256(data)
	cache.path, cache.mod, cache.size = p, st.ModTime().UnixNano(), st.Size()
	cache.bin = Binary{Path: p, Data: data, Hash: hex.EncodeToString(sum[:]), Interp: interp}
	return cache.bin, nil
}

// ErrDynamic is wrapped when a dynamically linked binary's loader or
// libraries cannot be found to go with it.
var ErrDynamic = errors.New("dynamically linked")

// CheckStatic fails unless data is an ELF executable with no program
// interpreter (the dynamic loader a FROM-scratch image lacks).
func CheckStatic(data []byte) error {
	interp, err := interpreter(data)
	if err != nil {
		return err
	}
	if interp != "" {
		return fmt.Errorf("%w (it needs the loader %s, which a FROM-scratch image lacks): build ctrperf with CGO_ENABLED=0, as `make build` does", ErrDynamic, interp)
	}
	return nil
}

// interpreter returns the program interpreter of an ELF executable, "" for
// a static one.
func interpreter(data []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("not an executable (ELF type %s)", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil || len(b) == 0 {
			return "", fmt.Errorf("%w: unreadable program interpreter", ErrDynamic)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// Runtime returns what a dynamically linked b needs beside it in an empty
// image: its loader and the shared libraries it needs (recursively), each
// at the path the loader looks for it, read from root ("/" on the host).
// A static binary needs nothing. It fails, naming the fix, when a library
// cannot be found.
func (b Binary) Runtime(root string) (map[string][]byte, error) {
	if b.Interp == "" {
		return nil, nil
	}
	out := map[string][]byte{}
	interp, err := os.ReadFile(filepath.Join(root, b.Interp))
	if err != nil {
		return nil, fmt.Errorf("%w: its loader %s: %w; build ctrperf with CGO_ENABLED=0 (as `make build` does) for images FROM scratch", ErrDynamic, b.Interp, err)
	}
	out[b.Interp] = interp
	dirs := libDirs(b.Interp)
	queue, err := needed(b.Data)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		lib := queue[0]
		queue = queue[1:]
		if seen[lib] || lib == path.Base(b.Interp) { // libc needs the loader, already there
			continue
		}
		seen[lib] = true
		var found bool
		for _, d := range dirs {
			p := path.Join(d, lib)
			data, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				continue
			}
			if p != b.Interp {
				out[p] = data
			}
			more, err := needed(data)
			if err != nil {
				return nil, fmt.Errorf("library %s: %w", p, err)
			}
			queue = append(queue, more...)
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("%w: library %s not found in %s; build ctrperf with CGO_ENABLED=0 (as `make build` does) for images FROM scratch", ErrDynamic, lib, strings.Join(dirs, ", "))
		}
	}
	return out, nil
}

// needed lists an ELF object's DT_NEEDED libraries.
func needed(data []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not an ELF object: %w", err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read its needed libraries: %w", err)
	}
	return libs, nil
}

// libDirs are the directories the loader searches without ld.so.cache
// (an empty image has none): the multiarch directories of Debian and
// Ubuntu, then the loader's own directory and the classic ones.
func libDirs(interp string) []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu",
		"arm": "arm-linux-gnueabihf", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "riscv64": "riscv64-linux-gnu"}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	dirs = append(dirs, path.Dir(interp), "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	var out []string
	for _, d := range dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
