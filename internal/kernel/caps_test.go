package kernel

import (
	"fmt"
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

func TestHostPID(t *testing.T) {
	proc := t.TempDir()
	write := func(pid int, ppid int, nspid string) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("Name:\tx\nPPid:\t%d\nNSpid:\t%s\n", ppid, nspid)
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 0, "1")
	write(100, 1, "100")          // containerd-shim of the outer container
	write(200, 100, "200\t1")     // the outer container's dockerd (pid 1 inside)
	write(210, 200, "210\t15")    // a shim of the inner engine
	write(220, 210, "220\t17\t1") // an inner container's process: 17 in the outer namespace
	write(300, 1, "300\t17")      // another container's pid 17: not under the outer one
	got, err := NewFS(Roots{Proc: proc}).HostPID(17, 200)
	if err != nil || got != 220 {
		t.Errorf("HostPID(17 under 200) = %d, %v; want 220", got, err)
	}
	if _, err := NewFS(Roots{Proc: proc}).HostPID(99, 200); err == nil {
		t.Error("HostPID of a pid nobody has: no error")
	}
}
