package kernel

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMachineID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, id, other := write("empty", "\n"), write("id", "3d1219c7c4c5404aaa1f6d2a48adfda4\n"), write("other", "ffff\n")
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		desc  string
		files []string
		want  string
	}{
		{"the first file", []string{id, other}, "3d1219c7c4c5404aaa1f6d2a48adfda4"},
		{"a missing or empty file is passed over", []string{missing, empty, other}, "ffff"},
		{"none: a machine without an id", []string{missing, empty}, ""},
	}
	for _, tt := range tests {
		if got := MachineID(tt.files...); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.desc, got, tt.want)
		}
	}
}
