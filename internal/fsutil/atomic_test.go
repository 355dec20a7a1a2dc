package fsutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		desc    string
		setup   func(t *testing.T, dir string) // prepares dir before the write
		name    string                         // relative to dir
		data    string
		perm    os.FileMode
		wantErr string // substring; "" means success
		want    string // content of name afterwards (success or not)
	}{
		{desc: "new file gets content and perm", name: "state.json", data: `{"a":1}`, perm: 0o644, want: `{"a":1}`},
		{desc: "private perm is kept, not widened", name: "state.json", data: "x", perm: 0o600, want: "x"},
		{desc: "perm is applied as given, not masked by the umask", name: "state.json", data: "x", perm: 0o666, want: "x"},
		{desc: "empty data gives an empty file", name: "empty", data: "", perm: 0o644, want: ""},
		{
			desc: "existing file is replaced and takes the new perm",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "state.json"), "old content, longer than the new", 0o600)
			},
			name: "state.json", data: "new", perm: 0o644, want: "new",
		},
		{
			desc: "missing directory fails and names the path",
			name: "missing/state.json",
			data: "x", perm: 0o644,
			wantErr: "missing/state.json",
		},
		{
			desc: "a directory in place of the file fails and leaves it alone",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(filepath.Join(dir, "state.json", "inside"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			name: "state.json", data: "x", perm: 0o644,
			wantErr: "replace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			before := listDir(t, dir)
			path := filepath.Join(dir, tt.name)
			err := WriteFileAtomic(path, []byte(tt.data), tt.perm)
			after := listDir(t, dir)

			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one containing %q and the path %s", err, tt.wantErr, path)
				}
				if strings.Join(after, " ") != strings.Join(before, " ") {
					t.Errorf("directory after the failure %q, want it unchanged %q (temp file left?)", after, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("content %q, want %q", b, tt.want)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tt.perm {
				t.Errorf("perm %v, want %v", st.Mode().Perm(), tt.perm)
			}
			if len(after) != 1 || after[0] != tt.name {
				t.Errorf("directory holds %q, want only %s (temp file left?)", after, tt.name)
			}
		})
	}
}

func TestWriteFileAtomicReplacesSymlinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	write(t, target, "target", 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target" {
		t.Errorf("target changed to %q", b)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("link is not a regular file now: %v, %v", st, err)
	}
}

func write(t *testing.T, path, s string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func listDir(t *testing.T, dir string) []string {
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

func TestReplaceFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status.json")
	for _, content := range []string{"first", "second"} {
		if err := ReplaceFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Errorf("content %q %v, want %q", b, err, content)
		}
	}
	if n := len(listDir(t, filepath.Dir(p))); n != 1 {
		t.Errorf("%d files left, want only the status file", n)
	}
}
