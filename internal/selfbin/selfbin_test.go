package selfbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// elfFile returns a minimal ELF64 little-endian executable with the given
// program header types (no sections, no code: enough for debug/elf).
func elfFile(typ elf.Type, progs ...elf.ProgType) []byte {
	var b bytes.Buffer
	const ehsize, phsize = 64, 56
	ident := [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)}
	b.Write(ident[:])
	le := binary.LittleEndian
	w := func(v any) { _ = binary.Write(&b, le, v) }
	w(uint16(typ))
	w(uint16(elf.EM_X86_64))
	w(uint32(elf.EV_CURRENT))
	w(uint64(0x401000)) // entry
	phoff := uint64(0)
	if len(progs) > 0 {
		phoff = ehsize
	}
	w(phoff)
	w(uint64(0)) // shoff
	w(uint32(0)) // flags
	w(uint16(ehsize))
	w(uint16(phsize))
	w(uint16(len(progs)))
	w(uint16(64)) // shentsize
	w(uint16(0))  // shnum
	w(uint16(0))  // shstrndx
	// The loader's path follows the program headers.
	interpOff := uint64(ehsize + phsize*len(progs))
	for _, p := range progs {
		off, size := uint64(0), uint64(0)
		if p == elf.PT_INTERP {
			off, size = interpOff, uint64(len(testInterp)+1)
		}
		w(uint32(p))
		w(uint32(elf.PF_R))
		w(off)
		w(uint64(0)) // vaddr
		w(uint64(0)) // paddr
		w(size)      // filesz
		w(size)      // memsz
		w(uint64(1)) // align
	}
	b.WriteString(testInterp + "\x00")
	return b.Bytes()
}

const testInterp = "/lib64/ld-test.so.2"

func TestCheckStatic(t *testing.T) {
	tests := []struct {
		desc    string
		data    []byte
		want    string // "" for no error
		dynamic bool
	}{
		{"static executable", elfFile(elf.ET_EXEC, elf.PT_LOAD, elf.PT_NOTE), "", false},
		{"static position-independent executable", elfFile(elf.ET_DYN, elf.PT_LOAD), "", false},
		{"needs a loader", elfFile(elf.ET_EXEC, elf.PT_LOAD, elf.PT_INTERP), "needs the loader /lib64/ld-test.so.2", true},
		{"object file", elfFile(elf.ET_REL), "not an executable", false},
		{"a script", []byte("#!/bin/sh\necho hi\n"), "not an ELF executable", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := CheckStatic(tc.data)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrDynamic) != tc.dynamic {
				t.Errorf("errors.Is(err, ErrDynamic) = %v, want %v", !tc.dynamic, tc.dynamic)
			}
		})
	}
}

func TestReadFollowsTheEnvironmentAndTheFile(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ctrperf")
	if err := os.WriteFile(bin, elfFile(elf.ET_EXEC, elf.PT_LOAD), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, link)
	p, err := Path()
	if err != nil || p != bin {
		t.Fatalf("Path() = %q, %v; want %q (the symlink resolved)", p, err, bin)
	}
	first, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if first.Path != bin || len(first.Hash) != 64 || !bytes.Equal(first.Data, elfFile(elf.ET_EXEC, elf.PT_LOAD)) {
		t.Fatalf("Static() = %s %s (%d bytes)", first.Path, first.Hash, len(first.Data))
	}
	// A rebuilt binary (other size) is read again, not served from the cache.
	if err := os.WriteFile(bin, elfFile(elf.ET_EXEC, elf.PT_LOAD, elf.PT_NOTE), 0o755); err != nil {
		t.Fatal(err)
	}
	second, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if second.Hash == first.Hash {
		t.Error("the hash did not change with the binary")
	}
	if err := os.WriteFile(bin, elfFile(elf.ET_EXEC, elf.PT_INTERP), 0o755); err != nil {
		t.Fatal(err)
	}
	third, err := Read()
	if err != nil || third.Interp != testInterp {
		t.Fatalf("Read() of a dynamic binary: interpreter %q, %v; want %s", third.Interp, err, testInterp)
	}
	// Without its loader at hand it cannot go into an empty image.
	if _, err := third.Runtime(t.TempDir()); !errors.Is(err, ErrDynamic) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("Runtime() with no loader: %v, want ErrDynamic with the fix", err)
	}
	if rt, err := second.Runtime(t.TempDir()); err != nil || rt != nil {
		t.Errorf("Runtime() of a static binary: %v, %v; want nothing needed", rt, err)
	}

	t.Setenv(Env, filepath.Join(dir, "missing"))
	if _, err := Path(); err == nil || !strings.Contains(err.Error(), Env) {
		t.Errorf("Path() with a missing binary: %v, want an error naming %s", err, Env)
	}
}

// TestRuntimeOfAHostBinary: a dynamically linked program of this machine
// (/bin/true on Debian) needs its loader and libc, found where the loader
// looks for them without ld.so.cache.
func TestRuntimeOfAHostBinary(t *testing.T) {
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skipf("no /bin/true: %v", err)
	}
	interp, err := interpreter(data)
	if err != nil || interp == "" {
		t.Skipf("/bin/true is not dynamically linked here (%v)", err)
	}
	rt, err := Binary{Path: "/bin/true", Data: data, Interp: interp}.Runtime("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(rt[interp]) == 0 {
		t.Errorf("no loader %s in %v", interp, keys(rt))
	}
	libc := false
	for p := range rt {
		if filepath.Base(p) == "libc.so.6" {
			libc = true
		}
		if filepath.Base(p) == filepath.Base(interp) && p != interp {
			t.Errorf("the loader twice: %s and %s", interp, p)
		}
	}
	if !libc {
		t.Errorf("no libc.so.6 in %v", keys(rt))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
