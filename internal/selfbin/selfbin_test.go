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
	for _, p := range progs {
		w(uint32(p))
		w(uint32(elf.PF_R))
		w(uint64(0)) // offset
		w(uint64(0)) // vaddr
		w(uint64(0)) // paddr
		w(uint64(0)) // filesz
		w(uint64(0)) // memsz
		w(uint64(1)) // align
	}
	return b.Bytes()
}

func TestCheckStatic(t *testing.T) {
	tests := []struct {
		desc    string
		data    []byte
		want    string // "" for no error
		dynamic bool
	}{
		{"static executable", elfFile(elf.ET_EXEC, elf.PT_LOAD, elf.PT_NOTE), "", false},
		{"static position-independent executable", elfFile(elf.ET_DYN, elf.PT_LOAD), "", false},
		{"needs a loader", elfFile(elf.ET_EXEC, elf.PT_LOAD, elf.PT_INTERP), "CGO_ENABLED=0", true},
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

func TestStaticFollowsTheEnvironmentAndTheFile(t *testing.T) {
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
	first, err := Static()
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
	second, err := Static()
	if err != nil {
		t.Fatal(err)
	}
	if second.Hash == first.Hash {
		t.Error("the hash did not change with the binary")
	}
	if err := os.WriteFile(bin, elfFile(elf.ET_EXEC, elf.PT_INTERP), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Static(); !errors.Is(err, ErrDynamic) || !strings.Contains(err.Error(), bin) {
		t.Errorf("Static() of a dynamic binary: %v, want ErrDynamic naming %s", err, bin)
	}

	t.Setenv(Env, filepath.Join(dir, "missing"))
	if _, err := Path(); err == nil || !strings.Contains(err.Error(), Env) {
		t.Errorf("Path() with a missing binary: %v, want an error naming %s", err, Env)
	}
}
