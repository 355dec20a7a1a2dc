package kernel

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBootID(t *testing.T) {
	proc := t.TempDir()
	if _, err := BootID(proc); err == nil {
		t.Error("no boot_id: want an error")
	}
	dir := filepath.Join(proc, "sys/kernel/random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte("5f1c2a9e-0d4b-4c1e-9a57-2b8d3e6f7a10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err := BootID(proc); err != nil || id != "5f1c2a9e-0d4b-4c1e-9a57-2b8d3e6f7a10" {
		t.Errorf("BootID = %q, %v", id, err)
	}
	if id, err := BootID("/proc"); err != nil || len(id) != 36 {
		t.Errorf("this machine's boot id = %q, %v", id, err)
	}
}
