// Package selfbin finds the ctrperf binary that holds the programs ctrperf
// deploys (ticketd, as the hidden command `ctrperf __ticketd`), so that
// images and bare-metal runs need neither the source tree nor a Go
// toolchain: an image gets a copy of this binary, a host run executes it.
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
	"path/filepath"
	"strings"
	"sync"
)

// Env names the ctrperf binary to use instead of the running one.
const Env = "CTRPERF_SELF_BINARY"

// Ticketd is the hidden command of ctrperf that runs the web workload's
// server: `ctrperf __ticketd FLAGS...` takes ticketd's own flags.
const Ticketd = "__ticketd"

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
}

var cache struct {
	sync.Mutex
	path string
	mod  int64
	size int64
	bin  Binary
}

// Static returns the ctrperf binary's bytes for a FROM-scratch image. It
// refuses a dynamically linked binary (one built with cgo), which would
// fail in the image with a bare "no such file or directory". The bytes are
// read once per process while the file stays the same.
func Static() (Binary, error) {
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
	if err := CheckStatic(data); err != nil {
		return Binary{}, fmt.Errorf("ctrperf binary %s: %w", p, err)
	}
	sum := sha256.Sum256(data)
	cache.path, cache.mod, cache.size = p, st.ModTime().UnixNano(), st.Size()
	cache.bin = Binary{Path: p, Data: data, Hash: hex.EncodeToString(sum[:])}
	return cache.bin, nil
}

// ErrDynamic is wrapped when the binary needs a dynamic loader.
var ErrDynamic = errors.New("dynamically linked")

// CheckStatic fails unless data is an ELF executable with no program
// interpreter (the dynamic loader a FROM-scratch image lacks).
func CheckStatic(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("not an executable (ELF type %s)", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w (it needs a dynamic loader, which a FROM-scratch image lacks): build ctrperf with CGO_ENABLED=0, as `make build` does", ErrDynamic)
		}
	}
	return nil
}
