package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/selfbin"
)

// staticELF is the smallest file debug/elf reads as a static executable:
// an ELF64 header with no program headers.
func staticELF(entry byte) []byte {
	h := make([]byte, 64)
	copy(h, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	h[16], h[18], h[20] = 2, 62, 1 // ET_EXEC, EM_X86_64, EV_CURRENT
	h[24] = entry                  // e_entry: makes two binaries differ
	h[52], h[54], h[58] = 64, 56, 64
	return h
}

// TestProgramImageCopiesTheBinary: a Program image holds the ctrperf
// binary at /ctrperf with the hidden command as entrypoint; the same
// binary is cached, another one rebuilds, a dynamic one is refused.
func TestProgramImageCopiesTheBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ctrperf")
	if err := os.WriteFile(bin, staticELF(1), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(selfbin.Env, bin)
	f := newFakeEngine()
	ctx := context.Background()
	d := Program("prog", "ctrperf/prog:latest", "__prog")
	first, err := BuildFrom(ctx, f, d)
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != ActionBuilt || len(f.builds) != 1 {
		t.Fatalf("first build: %+v, %d builds", first, len(f.builds))
	}
	b := f.builds[0]
	if mode, ok := b.Files["rootfs/ctrperf"]; !ok || mode&0o111 == 0 {
		t.Errorf("context files %v: want an executable rootfs/ctrperf", b.Files)
	}
	if !strings.Contains(b.Dockerfile, `ENTRYPOINT ["/ctrperf","__prog"]`) || !strings.Contains(b.Dockerfile, "FROM scratch") {
		t.Errorf("Dockerfile:\n%s", b.Dockerfile)
	}

	again, err := BuildFrom(ctx, f, d)
	if err != nil || again.Action != ActionCached || again.Hash != first.Hash {
		t.Errorf("same binary: %+v, %v; want cached with hash %s", again, err, first.Hash)
	}

	if err := os.WriteFile(bin, staticELF(2), 0o755); err != nil {
		t.Fatal(err)
	}
	changed, err := BuildFrom(ctx, f, d)
	if err != nil || changed.Action != ActionBuilt || changed.Hash == first.Hash {
		t.Errorf("another binary: %+v, %v; want a rebuild with a new hash", changed, err)
	}

	// A loader the file does not name readably cannot be brought along.
	dynamic := staticELF(3)
	dynamic[56] = 1 // e_phnum = 1, at e_phoff 64:
	dynamic[32] = 64
	dynamic = append(dynamic, make([]byte, 56)...)
	dynamic[64] = 3 // PT_INTERP
	if err := os.WriteFile(bin, dynamic, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildFrom(ctx, f, d); !errors.Is(err, selfbin.ErrDynamic) {
		t.Errorf("dynamic binary: %v, want selfbin.ErrDynamic", err)
	}
}
