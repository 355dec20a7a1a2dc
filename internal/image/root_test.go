package image

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBaseMirrorUnreachableRoot runs the real debootstrap against a mirror
// nobody serves (a closed port on loopback) and checks the error says what
// to do and that nothing is left behind: no rootfs, no tarball, no image.
func TestBaseMirrorUnreachableRoot(t *testing.T) {
	t.Parallel() // its own run id, images and cache dir; no timing check (issue 25)
	if os.Geteuid() != 0 {
		t.Skip("debootstrap needs root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (make bootstrap)")
	}
	dir := t.TempDir()
	b := Base{Name: "unreachable", Repo: "ctrperf-test/unreachable", Suite: "bookworm", Variant: "minbase", Mirror: "http://127.0.0.1:9/debian"}
	f := newFakeEngine()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	_, err := BuildBase(ctx, f, b, WithCacheDir(dir), WithProgress(&progress))
	t.Log(err)
	if !errors.Is(err, ErrMirrorUnreachable) {
		t.Fatalf("err = %v, want ErrMirrorUnreachable\nprogress:\n%s", err, progress.String())
	}
	for _, want := range []string{"could not reach the Debian mirror http://127.0.0.1:9/debian", "check network/proxy", "CTRPERF_BASE_IMAGE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "unreachable-*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if len(f.images) != 0 || len(f.imports) != 0 {
		t.Errorf("engine got images %v / imports %v", f.images, f.imports)
	}
}
