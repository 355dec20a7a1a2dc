package remote

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"ctrperf/internal/plan"
	"ctrperf/internal/sshdest"
)

func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		desc, sys, arch, kernel, goarch, want string
	}{
		{"this machine", "Linux", "x86_64", "6.18.44-fc-v669", "amd64", ""},
		{"arm64 host of an arm64 build", "Linux", "aarch64", "5.10.0-28-arm64", "arm64", ""},
		{"arm64 host of an amd64 build", "Linux", "aarch64", "6.1.0", "amd64", "its architecture is aarch64 and this ctrperf is built for x86_64"},
		{"not Linux", "FreeBSD", "amd64", "14.0-RELEASE", "amd64", "ctrperf runs on Linux only"},
		{"an old kernel", "Linux", "x86_64", "2.6.32-754.el6.x86_64", "amd64", "older than 3.10"},
		{"3.10 is enough", "Linux", "x86_64", "3.10.0-1160.el7.x86_64", "amd64", ""},
	} {
		got := Unsupported(c.sys, c.arch, c.kernel, c.goarch)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.desc, got, c.want)
		}
	}
}

func TestExplainSSHFailures(t *testing.T) {
	h := &Host{Dest: plan.Dest{Raw: "lab-sut", Host: "lab-sut"}, Resolved: sshdest.Resolved{HostName: "198.19.200.2", User: "root", Port: 22,
		IdentityFiles: []string{"/k/id"}, UserKnownHostsFiles: []string{"/k/known_hosts"}}}
	exit255 := exec.Command("sh", "-c", "exit 255").Run()
	for _, c := range []struct {
		desc, stderr string
		want         error
		advice       string
	}{
		{"unknown key", "No ED25519 host key is known for 198.19.200.2 and you have requested strict checking.\nHost key verification failed.", ErrUnknownHostKey, "--accept-new-host-key"},
		{"changed key", "@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nOffending ED25519 key in /k/known_hosts:1\nHost key for 198.19.200.2 has changed and you have requested strict checking.\nHost key verification failed.", ErrChangedHostKey, "ssh-keygen -f /k/known_hosts -R 198.19.200.2"},
		{"refused login", "root@198.19.200.2: Permission denied (publickey).", ErrAuthRefused, "/k/id"},
		{"refused connection", "ssh: connect to host 198.19.200.2 port 22: Connection refused", ErrUnreachable, "198.19.200.2"},
		{"no route", "ssh: connect to host 198.19.200.9 port 22: No route to host", ErrUnreachable, ""},
		{"a timeout", "ssh: connect to host 198.19.200.250 port 22: Connection timed out", ErrUnreachable, ""},
		{"a name", "ssh: Could not resolve hostname nosuch: Name or service not known", ErrUnreachable, ""},
		{"a full disk", "cat: write error: No space left on device", ErrDiskFull, ""},
	} {
		err := h.explain(exit255, c.stderr, SSHOptions{})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.advice) || !strings.Contains(err.Error(), "lab-sut") {
			t.Errorf("%s: %v, want %v with %q", c.desc, err, c.want, c.advice)
		}
	}
	if err := h.explain(exec.Command("sh", "-c", "exit 3").Run(), "ctrperf: the copy's sha256 is abc", SSHOptions{}); err == nil ||
		!strings.Contains(err.Error(), "sha256 is abc") {
		t.Errorf("a remote command's failure: %v", err)
	}
	if err := h.explain(nil, "", SSHOptions{}); err != nil {
		t.Errorf("no failure: %v", err)
	}
}

func TestSSHArgs(t *testing.T) {
	d := plan.Dest{Raw: "ssh://bob@h:2222", User: "bob", Host: "h", Port: 2222}
	got := strings.Join(SSHOptions{Config: "/c", AcceptNewHostKey: true}.sshArgs(d, "uname"), " ")
	for _, want := range []string{"-F /c", "-o BatchMode=yes", "-o StrictHostKeyChecking=accept-new", "-l bob -p 2222 -- h uname"} {
		if !strings.Contains(got, want) {
			t.Errorf("ssh %s: missing %q", got, want)
		}
	}
	if got := strings.Join(SSHOptions{}.sshArgs(d), " "); !strings.Contains(got, "StrictHostKeyChecking=yes") || strings.Contains(got, "-F") {
		t.Errorf("default ssh %s", got)
	}
}
