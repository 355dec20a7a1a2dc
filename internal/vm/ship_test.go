package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestDriveAdd(t *testing.T) {
	for _, tc := range []struct {
		desc, path, want string
		refused          bool
	}{
		{"a guest's data directory", "/var/lib/ctrperf/vm/ctrperf-vm-r1-0/ctrperf-ship-1.tar",
			"drive_add 0 if=none,id=ctrperf-ship-1,file=/var/lib/ctrperf/vm/ctrperf-vm-r1-0/ctrperf-ship-1.tar,format=raw,readonly=on", false},
		{"a comma doubled", "/data,x/ctrperf-ship-1.tar", "drive_add 0 if=none,id=ctrperf-ship-1,file=/data,,x/ctrperf-ship-1.tar,format=raw,readonly=on", false},
		{"a blank splits HMP's arguments", "/data x/ctrperf-ship-1.tar", "", true},
		{"a quote", "/data'x/ctrperf-ship-1.tar", "", true},
	} {
		got, err := driveAdd("ctrperf-ship-1", tc.path)
		if (err != nil) != tc.refused || got != tc.want {
			t.Errorf("%s: %q, %v; want %q (refused %v)", tc.desc, got, err, tc.want, tc.refused)
		}
	}
}

func TestHasDrive(t *testing.T) {
	// `info block` of a guest with its overlay and a shipment's disk.
	const both = "root (#block143): /var/lib/ctrperf/vm/ctrperf-vm-x-0/root.qcow2 (qcow2)\r\n" +
		"    Attached to:      /machine/peripheral-anon/device[0]/virtio-backend\r\n    Cache mode:       writeback, direct\r\n\r\n" +
		"ctrperf-ship-1 (#block512): /var/lib/ctrperf/vm/ctrperf-vm-x-0/ctrperf-ship-1.tar (raw, read-only)\r\n" +
		"    Attached to:      /machine/peripheral/ctrperf-ship-1/virtio-backend\r\n"
	for _, tc := range []struct {
		desc, out, id string
		want          bool
	}{
		{"attached", both, "ctrperf-ship-1", true},
		{"another shipment's", both, "ctrperf-ship-12", false},
		{"named only in another's path", "root (#block1): /x/ctrperf-ship-1 (qcow2)\r\n", "ctrperf-ship-1", false},
		{"gone", "root (#block143): /x/root.qcow2 (qcow2)\r\n", "ctrperf-ship-1", false},
	} {
		if got := hasDrive(tc.out, tc.id); got != tc.want {
			t.Errorf("%s: hasDrive = %v", tc.desc, got)
		}
	}
}

// hmpServer is a QEMU monitor on a unix socket: each human monitor
// command is answered by answer; the commands are recorded.
type hmpServer struct {
	mu     sync.Mutex
	cmds   []string
	answer func(cmd string) string
}

func (s *hmpServer) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cmds)
}

func (s *hmpServer) serve(t *testing.T, socket string) {
	t.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					var cmd struct {
						Execute   string
						Arguments map[string]string
					}
					_ = json.Unmarshal(line, &cmd)
					reply := `{"return": {}}`
					if cmd.Execute == "human-monitor-command" {
						s.mu.Lock()
						s.cmds = append(s.cmds, cmd.Arguments["command-line"])
						s.mu.Unlock()
						out, _ := json.Marshal(s.answer(cmd.Arguments["command-line"]))
						reply = `{"return": ` + string(out) + `}`
					}
					_, _ = c.Write([]byte(reply + "\n"))
				}
			}()
		}
	}()
}

// TestAttachDetach: the archive is opened read-only as a drive and
// plugged as a disk whose serial is its name; a disk QEMU refuses closes
// the drive again; a detach waits until QEMU has dropped the drive.
func TestAttachDetach(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		deviceAdd string // device_add's output
		want      []string
		fails     bool
	}{
		{"attached", "", []string{"drive_add 0 if=none,id=ctrperf-ship-1,file=/d/ctrperf-ship-1.tar,format=raw,readonly=on",
			"device_add virtio-blk-pci,drive=ctrperf-ship-1,id=ctrperf-ship-1,serial=ctrperf-ship-1"}, false},
		{"QEMU refuses the disk: the drive is closed", "Error: Bus 'pci.0' does not support hotplugging\r\n", []string{
			"drive_add 0 if=none,id=ctrperf-ship-1,file=/d/ctrperf-ship-1.tar,format=raw,readonly=on",
			"device_add virtio-blk-pci,drive=ctrperf-ship-1,id=ctrperf-ship-1,serial=ctrperf-ship-1", "drive_del ctrperf-ship-1"}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			g := &Guest{State: State{Name: "g", Dir: t.TempDir()}}
			s := &hmpServer{answer: func(cmd string) string {
				switch {
				case strings.HasPrefix(cmd, "drive_add"):
					return "OK\r\n"
				case strings.HasPrefix(cmd, "device_add"):
					return tc.deviceAdd
				}
				return ""
			}}
			s.serve(t, g.qmp())
			add, err := driveAdd("ctrperf-ship-1", "/d/ctrperf-ship-1.tar")
			if err != nil {
				t.Fatal(err)
			}
			err = g.attach(context.Background(), "ctrperf-ship-1", add)
			if (err != nil) != tc.fails || !slices.Equal(s.commands(), tc.want) {
				t.Errorf("attach: %v; commands %q, want %q", err, s.commands(), tc.want)
			}
		})
	}
	t.Run("detach waits for the drive to go", func(t *testing.T) {
		g := &Guest{State: State{Name: "g", Dir: t.TempDir()}}
		infos := 0
		s := &hmpServer{answer: func(cmd string) string {
			if cmd == "info block" {
				infos++
				if infos < 3 { // the guest has not acknowledged the unplug yet
					return "ctrperf-ship-1 (#block512): /d/ctrperf-ship-1.tar (raw, read-only)\r\n"
				}
				return "root (#block1): /d/root.qcow2 (qcow2)\r\n"
			}
			return ""
		}}
		s.serve(t, g.qmp())
		if err := g.detach(context.Background(), "ctrperf-ship-1"); err != nil {
			t.Fatal(err)
		}
		if got := s.commands(); len(got) != 4 || got[0] != "device_del ctrperf-ship-1" || got[3] != "info block" {
			t.Errorf("commands %q: want device_del, then info block until the drive is gone", got)
		}
	})
}

// TestWriteArchive: the archive goes to a new file (never over another
// shipment's), and an empty one is refused.
func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ctrperf-ship-1.tar")
	if n, err := writeArchive(p, strings.NewReader("archive")); err != nil || n != 7 {
		t.Fatalf("writeArchive = %d, %v", n, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "archive" {
		t.Errorf("file holds %q", b)
	}
	if _, err := writeArchive(p, strings.NewReader("other")); err == nil {
		t.Error("an existing file was overwritten")
	}
	if _, err := writeArchive(filepath.Join(dir, "ctrperf-ship-2.tar"), strings.NewReader("")); err == nil {
		t.Error("an empty archive was written")
	}
}
