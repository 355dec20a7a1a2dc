package kernel

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCapabilities(t *testing.T) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proc, "sys", "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	// This machine's dockerd, 2026-11-24: every capability but bit 24.
	status := "Name:\tdockerd\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\n"
	if err := os.WriteFile(filepath.Join(proc, "42", "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys", "kernel", "cap_last_cap"), []byte("40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := BoundingSet(proc, 42)
	if err != nil || set != 0x1fffeffffff {
		t.Fatalf("BoundingSet = %#x, %v", set, err)
	}
	last, err := LastCapability(proc)
	if err != nil || last != 40 {
		t.Fatalf("LastCapability = %d, %v", last, err)
	}
	if got := MissingCapabilities(set, last); !reflect.DeepEqual(got, []string{"CAP_SYS_RESOURCE"}) {
		t.Errorf("missing = %v, want [CAP_SYS_RESOURCE]", got)
	}
	if got := MissingCapabilities(1<<41-1, 40); got != nil {
		t.Errorf("full set: missing %v", got)
	}
	// A kernel newer than the table: its capability is named by number.
	if got := MissingCapabilities(1<<41-1, 41); !reflect.DeepEqual(got, []string{"cap_41"}) {
		t.Errorf("cap 41: %v", got)
	}
	if _, err := BoundingSet(proc, 7); err == nil {
		t.Error("BoundingSet of a missing process: no error")
	}
}
