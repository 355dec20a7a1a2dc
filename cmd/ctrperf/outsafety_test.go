package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/testenv"
)

// TestBenchRunRefusesUnsafeOutRoot runs the built binary as root on an
// output directory another local user could redirect (issue 24): a symlink
// planted at OUT/results.jsonl (anyone can plant one in /tmp), and an OUT
// that is world-writable and another user's. ctrperf exits 1 within a
// second, naming the path, before it needs Docker, and writes nothing
// outside OUT.
func TestBenchRunRefusesUnsafeOutRoot(t *testing.T) {
	testenv.RequireRoot(t, "chown OUT to another user")
	bin := testenv.Ctrperf(t)
	const nobody = 65534
	tests := []struct {
		desc  string
		setup func(t *testing.T, out, outside string) (refuse string)
	}{
		{"results.jsonl is a symlink to a file not yet created", func(t *testing.T, out, outside string) string {
			mustDo(t, os.Mkdir(out, 0o755))
			mustDo(t, os.Symlink(filepath.Join(outside, "created"), filepath.Join(out, "results.jsonl")))
			return filepath.Join(out, "results.jsonl")
		}},
		{"OUT is world-writable and another user's", func(t *testing.T, out, outside string) string {
			mustDo(t, os.Mkdir(out, 0o755))
			mustDo(t, os.Chmod(out, 0o777|os.ModeSticky))
			mustDo(t, os.Chown(out, nobody, nobody))
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			out, outside := filepath.Join(root, "out"), filepath.Join(root, "outside")
			mustDo(t, os.Mkdir(outside, 0o755))
			refuse := tt.setup(t, out, outside)
			before := entries(t, out)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--owners-dir", filepath.Join(root, "owners"),
				"bench", "run", "smoke", "--quick", "--out", out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || (ee.ExitCode() != 1 && ee.ExitCode() != 2) {
				t.Fatalf("exit: %v, want status 1 or 2\nstderr: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "refusing "+refuse+":") {
				t.Errorf("stderr does not name %s:\n%s", refuse, stderr.String())
			}
			if took > time.Second {
				t.Errorf("took %v to refuse, want under a second", took)
			}
			if got := entries(t, outside); len(got) != 0 {
				t.Errorf("written outside OUT: %v", got)
			}
			if got := entries(t, out); strings.Join(got, " ") != strings.Join(before, " ") {
				t.Errorf("OUT holds %v after the refusal, want %v as before", got, before)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteRenderedRefusesUnsafeDir: a report file (OUT/report.html, -o)
// is written only into a directory nobody else can change, and a symlink
// planted at its name is replaced, not followed.
func TestWriteRenderedRefusesUnsafeDir(t *testing.T) {
	render := func(w io.Writer) error { _, err := io.WriteString(w, "<html>report</html>"); return err }
	tests := []struct {
		desc  string
		setup func(t *testing.T, root string) (path, refuse string)
	}{
		{"an own directory", func(t *testing.T, root string) (string, string) {
			mustDo(t, os.Mkdir(filepath.Join(root, "out"), 0o755))
			return filepath.Join(root, "out", "report.html"), ""
		}},
		{"an own symlink to an own directory (out/latest)", func(t *testing.T, root string) (string, string) {
			mustDo(t, os.Mkdir(filepath.Join(root, "out"), 0o755))
			mustDo(t, os.Symlink("out", filepath.Join(root, "latest")))
			return filepath.Join(root, "latest", "report.html"), ""
		}},
		{"a symlink planted at report.html", func(t *testing.T, root string) (string, string) {
			mustDo(t, os.Mkdir(filepath.Join(root, "out"), 0o755))
			mustDo(t, os.Symlink(filepath.Join(root, "outside", "victim"), filepath.Join(root, "out", "report.html")))
			return filepath.Join(root, "out", "report.html"), ""
		}},
		{"a world-writable directory", func(t *testing.T, root string) (string, string) {
			mustDo(t, os.Mkdir(filepath.Join(root, "out"), 0o755))
			mustDo(t, os.Chmod(filepath.Join(root, "out"), 0o777))
			return filepath.Join(root, "out", "report.html"), filepath.Join(root, "out")
		}},
		{"a symlink into a world-writable directory", func(t *testing.T, root string) (string, string) {
			mustDo(t, os.MkdirAll(filepath.Join(root, "shared", "out"), 0o755))
			mustDo(t, os.Chmod(filepath.Join(root, "shared"), 0o777))
			mustDo(t, os.Symlink("shared/out", filepath.Join(root, "latest")))
			return filepath.Join(root, "latest", "report.html"), filepath.Join(root, "shared")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			mustDo(t, os.Mkdir(filepath.Join(root, "outside"), 0o755))
			mustDo(t, os.WriteFile(filepath.Join(root, "outside", "victim"), []byte("victim\n"), 0o644))
			path, refuse := tt.setup(t, root)
			err := writeRendered(io.Discard, path, "html", render)
			if refuse != "" {
				if err == nil || !strings.Contains(err.Error(), "refusing "+refuse+":") {
					t.Fatalf("error %v, want a refusal naming %s", err, refuse)
				}
				if _, err := os.Lstat(path); err == nil {
					t.Errorf("%s was written", path)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s is not a regular file now: %v", path, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(root, "outside", "victim")); string(b) != "victim\n" {
				t.Errorf("written through a link to the file outside: %q", b)
			}
		})
	}
}
