package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// sysBlock makes a sysfs block/ directory: each disk with its serial
// ("" for a disk without a serial file).
func sysBlock(t *testing.T, disks map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "block")
	for name, serial := range disks {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if serial == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name, "serial"), []byte(serial+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDiskBySerial(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		disks  map[string]string
		serial string
		want   string
		none   bool // errNoDisk
	}{
		{"the hot-plugged disk beside the root disk", map[string]string{"vda": "", "vdb": "ctrperf-ship-1"}, "ctrperf-ship-1", "vdb", false},
		{"the second of two shipments", map[string]string{"vdb": "ctrperf-ship-1", "vdc": "ctrperf-ship-2"}, "ctrperf-ship-2", "vdc", false},
		{"a serial that is a prefix of another is not it", map[string]string{"vdb": "ctrperf-ship-12"}, "ctrperf-ship-1", "", true},
		{"not there yet", map[string]string{"vda": "", "loop0": ""}, "ctrperf-ship-1", "", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := diskBySerial(sysBlock(t, tc.disks), tc.serial)
			if tc.none {
				if !errors.Is(err, errNoDisk) {
					t.Errorf("diskBySerial = %q, %v: want no such disk", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("diskBySerial = %q, %v: want %q", got, err, tc.want)
			}
		})
	}
	if _, err := diskBySerial(sysBlock(t, nil), ""); err == nil || errors.Is(err, errNoDisk) {
		t.Errorf("an empty serial: %v, want refused", err)
	}
}

// TestDisksOpenGivesUp: a disk that never comes is an error once the
// caller gives up, naming the serial.
func TestDisksOpenGivesUp(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "block", "vda"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Disks{Sys: root, Dev: root}.Open(ctx, "ctrperf-ship-9")
	if !errors.Is(err, errNoDisk) || !errors.Is(err, context.Canceled) {
		t.Errorf("Open = %v: want no such disk, cancelled", err)
	}
}
