package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeQMP answers one QMP session on c: the greeting, then each command
// from replies in turn (an event first, as QEMU may send one any time);
// it records the commands it read.
func fakeQMP(c net.Conn, replies []string, got chan<- []string) {
	defer c.Close()
	var cmds []string
	defer func() { got <- cmds }()
	_, _ = c.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
	r := bufio.NewReader(c)
	for _, reply := range replies {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmds = append(cmds, strings.TrimSpace(line))
		_, _ = c.Write([]byte(`{"event": "NIC_RX_FILTER_CHANGED", "data": {}}` + "\n" + reply + "\n"))
	}
}

func TestQMPSession(t *testing.T) {
	cases := []struct {
		desc    string
		replies []string
		want    string
		err     string
	}{
		{"the command worked: no output", []string{`{"return": {}}`, `{"return": ""}`}, "", ""},
		{"the command failed: its words", []string{`{"return": {}}`, `{"return": "Could not set up host forwarding rule 'tcp:127.0.0.1:1-10.0.2.15:2'\r\n"}`},
			"Could not set up host forwarding rule 'tcp:127.0.0.1:1-10.0.2.15:2'\r\n", ""},
		{"QMP refuses", []string{`{"error": {"class": "CommandNotFound", "desc": "nope"}}`}, "", "CommandNotFound: nope"},
	}
	for _, c := range cases {
		a, b := net.Pipe()
		got := make(chan []string, 1)
		go fakeQMP(b, c.replies, got)
		out, err := qmpSession(a, "hostfwd_add net0 tcp:127.0.0.1:1-10.0.2.15:2")
		a.Close()
		cmds := <-got
		if out != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %q, %v; want %q, error %q", c.desc, out, err, c.want, c.err)
		}
		if len(cmds) == 0 || cmds[0] != `{"execute":"qmp_capabilities"}` {
			t.Errorf("%s: first command %q, want the capabilities' negotiation", c.desc, cmds)
		}
		if len(cmds) == 2 {
			var cmd struct {
				Execute   string
				Arguments map[string]string
			}
			if err := json.Unmarshal([]byte(cmds[1]), &cmd); err != nil || cmd.Execute != "human-monitor-command" ||
				cmd.Arguments["command-line"] != "hostfwd_add net0 tcp:127.0.0.1:1-10.0.2.15:2" {
				t.Errorf("%s: command %q", c.desc, cmds[1])
			}
		}
	}
}

func TestRemoved(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"host forwarding rule for tcp:127.0.0.1:33417 removed\r\n", true},
		{"could not remove host forwarding rule 'tcp:127.0.0.1:1'\r\n", false},
		{"invalid format\r\n", false},
		{"", false},
	} {
		if got := removed(c.out); got != c.want {
			t.Errorf("removed(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

func TestForwardRule(t *testing.T) {
	if r := (forward{Host: 40001, Guest: 8080}).rule(userGuest.Addr()); r != "tcp:127.0.0.1:40001-10.0.2.15:8080" {
		t.Errorf("rule %q", r)
	}
}

func TestFindVirtiofsd(t *testing.T) {
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	cases := []struct {
		desc     string
		lookPath func(string) (string, error)
		files    []string
		want     string
	}{
		{"on PATH", func(string) (string, error) { return "/usr/bin/virtiofsd", nil }, nil, "/usr/bin/virtiofsd"},
		{"Debian 13's package", notFound, []string{"/usr/libexec/virtiofsd"}, "/usr/libexec/virtiofsd"},
		{"QEMU 7.2's", notFound, []string{"/usr/lib/qemu/virtiofsd"}, "/usr/lib/qemu/virtiofsd"},
		{"none", notFound, nil, ""},
	}
	for _, c := range cases {
		got, err := FindVirtiofsd(c.lookPath, func(p string) bool { return strings.Contains(strings.Join(c.files, " "), p) })
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: %q, %v; want %q", c.desc, got, err, c.want)
		}
	}
	if a := strings.Join(virtiofsdArgs("/r/v.sock", "/d/shared"), " "); a != "--socket-path=/r/v.sock -o source=/d/shared -o cache=auto" {
		t.Errorf("virtiofsd's command line %q", a)
	}
}

// TestVirtiofsdPID: clean kills a guest's virtiofsd only when the pid
// file's process names the guest's socket.
func TestVirtiofsdPID(t *testing.T) {
	dir, proc := t.TempDir(), t.TempDir()
	s := State{Name: "ctrperf-vm-s-0", Dir: dir}
	write := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if virtiofsdPID(s, proc) != 0 {
		t.Error("no pid file: a pid")
	}
	write(s.virtiofsdPIDFile(), "4242\n")
	write(filepath.Join(proc, "4242", "cmdline"), "/usr/lib/qemu/virtiofsd\x00--socket-path=/elsewhere/virtiofs.sock\x00")
	if virtiofsdPID(s, proc) != 0 {
		t.Error("a pid reused by another virtiofsd is taken")
	}
	write(filepath.Join(proc, "4242", "cmdline"), "/usr/lib/qemu/virtiofsd\x00--socket-path="+s.virtiofsSocket()+"\x00-o\x00source=/x\x00")
	if virtiofsdPID(s, proc) != 4242 {
		t.Error("the guest's virtiofsd is not found")
	}
}
