package sshdest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

func fixture(t *testing.T, name string) Resolved {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// The fixtures are ssh -G's output (OpenSSH 9.2) for a lab Host alias with
// every setting, an alias behind a ProxyJump with -l/-p given, and a bare
// address with no config.
func TestParseFixtures(t *testing.T) {
	lab := fixture(t, "lab-sut.G")
	want := Resolved{HostName: "198.19.200.2", User: "root", Port: 2222,
		IdentityFiles:         []string{"/var/lib/ctrperf/lab/id_ed25519"},
		StrictHostKeyChecking: "true", UserKnownHostsFiles: []string{"/var/lib/ctrperf/lab/known_hosts"}}
	if !reflect.DeepEqual(lab, want) {
		t.Errorf("lab-sut:\n got %+v\nwant %+v", lab, want)
	}
	if lab.Dest() != "root@198.19.200.2:2222" || lab.String() != "root@198.19.200.2:2222, key /var/lib/ctrperf/lab/id_ed25519" {
		t.Errorf("lab-sut: Dest %q String %q", lab.Dest(), lab.String())
	}
	far := fixture(t, "far.G")
	if far.User != "bob" || far.HostName != "10.1.2.3" || far.Port != 22 || far.ProxyJump != "jump@[198.19.200.2]:22" || len(far.IdentityFiles) != 7 {
		t.Errorf("far: %+v", far)
	}
	if s := far.String(); s != "bob@10.1.2.3:22 via jump@[198.19.200.2]:22, key ~/.ssh/id_rsa (+6)" {
		t.Errorf("far: String %q", s)
	}
	plain := fixture(t, "plain.G")
	if plain.Dest() != "root@198.19.200.3:22" || plain.ProxyJump != "" || plain.ProxyCommand != "" || len(plain.UserKnownHostsFiles) != 2 {
		t.Errorf("plain: %+v", plain)
	}
}

func TestParseRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"user root\nport 22\n":                  "no hostname",
		"hostname h\nport 0\n":                  `port "0" is not a port`,
		"hostname h\nport x\n":                  `port "x"`,
		"":                                      "no hostname",
		"hostname fd00::2\nproxycommand none\n": "",
	} {
		r, err := Parse([]byte(in))
		if want == "" {
			if err != nil || r.Port != 22 || r.Addr() != "[fd00::2]:22" {
				t.Errorf("Parse(%q) = %+v, %v", in, r, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestArgs(t *testing.T) {
	d, err := plan.ParseDest("ssh://bench@10.0.0.5:2222")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Args("/etc/lab/ssh_config", d), " "); got != "-G -F /etc/lab/ssh_config -l bench -p 2222 -- 10.0.0.5" {
		t.Errorf("Args = %q", got)
	}
	a, _ := plan.ParseDest("lab-sut")
	if got := strings.Join(Args("", a), " "); got != "-G -- lab-sut" {
		t.Errorf("Args without config = %q", got)
	}
	home, _ := os.UserHomeDir()
	if got := ExpandHome("~/.ssh/lab"); got != filepath.Join(home, ".ssh/lab") {
		t.Errorf("ExpandHome = %q", got)
	}
	if rh := RunHost(a, &Resolved{HostName: "198.19.200.2", User: "root", Port: 22}); rh.Name != "lab-sut" || rh.Dest != "root@198.19.200.2:22" {
		t.Errorf("RunHost = %+v", rh)
	}
	if RunHost(plan.Dest{}, nil) != nil {
		t.Error("RunHost of this machine: want nil")
	}
}

// Resolve runs the real ssh -G (it reads the config, it connects nowhere).
func TestResolveWithSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		if os.Getenv("CTRPERF_REQUIRE_LAB") == "1" {
			t.Fatal("ssh is not installed (CTRPERF_REQUIRE_LAB=1)")
		}
		t.Skip("ssh is not installed")
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, []byte("Host lab-sut\n  HostName 198.19.200.2\n  User root\n  Port 2222\n  IdentityFile /k/id\n  ProxyJump j@198.19.200.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := plan.ParseDest("lab-sut")
	r, err := Resolve(context.Background(), cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if r.Dest() != "root@198.19.200.2:2222" || r.IdentityFiles[0] != "/k/id" || !strings.Contains(r.ProxyJump, "198.19.200.3") {
		t.Errorf("Resolve = %+v", r)
	}
	// The command line's user and port win over the config, as in ssh.
	o, _ := plan.ParseDest("ssh://bob@lab-sut:2200")
	if r, err := Resolve(context.Background(), cfg, o); err != nil || r.Dest() != "bob@198.19.200.2:2200" {
		t.Errorf("Resolve(ssh://bob@lab-sut:2200) = %+v, %v", r, err)
	}
	if _, err := Resolve(context.Background(), filepath.Join(t.TempDir(), "missing"), d); err == nil || !strings.Contains(err.Error(), "ssh config") {
		t.Errorf("missing config: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("Host x\n  NoSuchKeyword yes\n"), 0o600)
	if _, err := Resolve(context.Background(), bad, d); err == nil || !strings.Contains(err.Error(), "ssh -G lab-sut") {
		t.Errorf("bad config: %v", err)
	}
	if _, err := Resolve(context.Background(), cfg, plan.Dest{}); err == nil {
		t.Error("Resolve of this machine: want an error")
	}
}
