package plan

import (
	"strings"
	"testing"
)

func TestParseDest(t *testing.T) {
	good := []struct {
		in         string
		user, host string
		port       int
		args       string
	}{
		{"lab-sut", "", "lab-sut", 0, "-- lab-sut"},
		{"root@198.19.200.2", "root", "198.19.200.2", 0, "-l root -- 198.19.200.2"},
		{"ssh://bench@10.0.0.5:2222", "bench", "10.0.0.5", 2222, "-l bench -p 2222 -- 10.0.0.5"},
		{"ssh://10.0.0.5", "", "10.0.0.5", 0, "-- 10.0.0.5"},
		{"ssh://u@[fd00::2]:22", "u", "fd00::2", 22, "-l u -p 22 -- fd00::2"},
		{"u@fd00::2", "u", "fd00::2", 0, "-l u -- fd00::2"},
		{"box.example.org", "", "box.example.org", 0, "-- box.example.org"},
	}
	for _, g := range good {
		d, err := ParseDest(g.in)
		if err != nil {
			t.Errorf("ParseDest(%q): %v", g.in, err)
			continue
		}
		if d.Raw != g.in || d.User != g.user || d.Host != g.host || d.Port != g.port || d.Local() {
			t.Errorf("ParseDest(%q) = %+v", g.in, d)
		}
		if a := strings.Join(d.SSHArgs(), " "); a != g.args {
			t.Errorf("ParseDest(%q).SSHArgs() = %q, want %q", g.in, a, g.args)
		}
	}
	if d, err := ParseDest("local"); err != nil || !d.Local() || d.String() != "local" {
		t.Errorf("local = %+v, %v", d, err)
	}
	bad := []struct{ in, want string }{
		{"", "empty; expected an SSH destination"},
		{"lab sut", "space or control character"},
		{"lab-sut\n", "space or control character"},
		{"-oProxyCommand=touch /tmp/x", "space"},
		{"-oProxyCommand=x", "starts with '-', which ssh would take for an option"},
		{"-lroot", "starts with '-'"},
		{"ssh://-oProxyCommand=x", "is not a host name"},
		{"ssh://u@h:0", "port 0 is out of range; expected 1 to 65535"},
		{"ssh://u@h:65536", "port 65536 is out of range"},
		{"ssh://u@h:99999999999999999999", "out of range"},
		{"ssh://u@h:", "empty port"},
		{"ssh://u@h:22/path", "no path, query or fragment"},
		{"ssh://u:secret@h", "holds a password"},
		{"ssh://", "has no host"},
		{"http://u@h", `scheme "http"`},
		{"ssh://u@h:x2", "not a valid URL"},
		{"root@", "has no host"},
		{"@h", `user "" is not a user name`},
		{"ro ot@h", "space"},
		{"root@h:22", "ssh takes no port after the host; write ssh://root@h:22"},
		{"root@h;rm", "is not a host name"},
		{"$(x)", "is not a host name"},
	}
	for _, b := range bad {
		_, err := ParseDest(b.in)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseDest(%q) = %v, want an error with %q", b.in, err, b.want)
		}
	}
}

func TestParseHostsFlag(t *testing.T) {
	h, err := ParseHosts("sut=lab-sut,load=root@198.19.200.3")
	if err != nil || h.SUT.Raw != "lab-sut" || h.Load.User != "root" || h.String() != "sut=lab-sut load=root@198.19.200.3" {
		t.Fatalf("ParseHosts = %+v, %v", h, err)
	}
	if h, err := ParseHosts("load=lab-load"); err != nil || h.SUT.Raw != "" || h.Load.Raw != "lab-load" {
		t.Errorf("load only = %+v, %v", h, err)
	}
	for in, want := range map[string]string{
		"":                     "--hosts is empty",
		"lab-sut":              `"lab-sut" is not role=destination`,
		"db=lab-sut":           `unknown role "db"`,
		"sut=a,sut=b":          "sut given twice",
		"sut=-oProxyCommand=x": "--hosts sut: \"-oProxyCommand=x\" starts with '-'",
		"sut=":                 "--hosts sut: empty",
		"load=ssh://h:70000":   "port 70000 is out of range",
	} {
		if _, err := ParseHosts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHosts(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

const hostsPlan = `name: x
workload: testweb
baseline: bare
ssh_config: lab/ssh_config
hosts: {sut: lab-sut, load: lab-load}
configurations:
  - name: bare
    runtime: host
  - name: docker
    runtime: docker
  - name: local-load
    runtime: docker
    hosts:
      load: local
  - name: other-sut
    runtime: docker
    hosts: {sut: "ssh://root@198.19.200.9:2222"}
`

// Plan-level hosts: are every configuration's; a configuration's own
// replace them role by role ("local" included), like app:; --hosts and
// --ssh-config replace both.
func TestHostsMerge(t *testing.T) {
	p, err := Parse("/plans/p.yaml", []byte(hostsPlan), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if p.SSHConfig != "/plans/lab/ssh_config" {
		t.Errorf("ssh_config = %q, want it relative to the plan file", p.SSHConfig)
	}
	want := map[string]string{
		"bare":       "sut=lab-sut load=lab-load",
		"docker":     "sut=lab-sut load=lab-load",
		"local-load": "sut=lab-sut load=local",
		"other-sut":  "sut=ssh://root@198.19.200.9:2222 load=lab-load",
	}
	for name, w := range want {
		c, _ := p.Config(name)
		if got := c.Hosts.String(); got != w {
			t.Errorf("%s: hosts %s, want %s", name, got, w)
		}
	}
	if c, _ := p.Config("local-load"); c.Hosts.Load != (Dest{}) {
		t.Errorf("an explicit local is the zero Dest after merging: %+v", c.Hosts.Load)
	}
	if !p.HasRemote() {
		t.Error("HasRemote = false")
	}
	uses := p.PlanHosts()
	if len(uses) != 3 || uses[0].Dest.Raw != "lab-sut" || uses[1].Dest.Raw != "lab-load" || strings.Join(uses[0].Roles, ",") != "sut" {
		t.Errorf("PlanHosts = %+v", uses)
	}

	over, _ := ParseHosts("load=root@198.19.200.3")
	p, err = Parse("/plans/p.yaml", []byte(hostsPlan), Options{Schema: testSchema{}, Hosts: over, SSHConfig: "/etc/other"})
	if err != nil {
		t.Fatal(err)
	}
	if p.SSHConfig != "/etc/other" {
		t.Errorf("--ssh-config: %q", p.SSHConfig)
	}
	for _, c := range p.Configurations {
		if c.Hosts.Load.Raw != "root@198.19.200.3" {
			t.Errorf("%s: --hosts load did not win: %s", c.Name, c.Hosts)
		}
	}
	if c, _ := p.Config("other-sut"); c.Hosts.SUT.Port != 2222 {
		t.Errorf("--hosts without sut keeps the configuration's: %s", c.Hosts)
	}

	plain, err := Parse("p.yaml", []byte(strings.Replace(hostsPlan[:strings.Index(hostsPlan, "configurations:")], "hosts: {sut: lab-sut, load: lab-load}\n", "", 1)+"configurations:\n  - name: bare\n    runtime: host\n"), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if plain.HasRemote() || len(plain.PlanHosts()) != 0 {
		t.Errorf("a plan without hosts: is all local: %+v", plain.PlanHosts())
	}
}

// The hosts are in the canonical form (and so in the hash): a plan run on
// other hosts is another experiment, and OUT/plan.yaml, parsed again,
// reaches the same hosts with the same ssh config. A plan without hosts:
// keeps its canonical form (no hosts key at all).
func TestHostsCanonicalAndHash(t *testing.T) {
	p, err := Parse("/plans/p.yaml", []byte(hostsPlan), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"ssh_config: /plans/lab/ssh_config\n", "    hosts:\n      sut: lab-sut\n      load: lab-load\n", "  - name: local-load\n", "      sut: ssh://root@198.19.200.9:2222\n"} {
		if !strings.Contains(string(b1), w) {
			t.Errorf("canonical form lacks %q:\n%s", w, b1)
		}
	}
	q, err := Parse("/out/plan.yaml", b1, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, b1)
	}
	b2, _ := q.Canonical()
	if string(b1) != string(b2) {
		t.Fatalf("canonical form changed on a second pass:\n%s\n---\n%s", b1, b2)
	}
	h1, _ := p.Hash()
	over, _ := ParseHosts("sut=lab-sut2")
	p2, err := Parse("/plans/p.yaml", []byte(hostsPlan), Options{Schema: testSchema{}, Hosts: over})
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := p2.Hash()
	if h1 == h2 {
		t.Error("other hosts, same hash")
	}
	if c, _ := p.Config("bare"); c.KnobMap()["hosts"] == nil {
		t.Errorf("the record's knobs name the hosts: %v", c.KnobMap())
	}
	local, err := Parse("p.yaml", []byte("name: x\nworkload: testweb\nbaseline: a\nhosts: {sut: local}\nconfigurations:\n  - name: a\n    runtime: host\n"), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := local.Canonical(); strings.Contains(string(b), "hosts") || strings.Contains(string(b), "ssh_config") {
		t.Errorf("all-local plan spells hosts:\n%s", b)
	}
}

func TestHostsErrors(t *testing.T) {
	const head = "name: x\nworkload: testweb\nbaseline: a\n"
	const conf = "configurations:\n  - name: a\n    runtime: docker\n"
	tests := []struct{ desc, body, want string }{
		{"bad url at its line", "hosts:\n  sut: lab-sut\n  load: ssh://u@h:70000\n" + conf,
			"p.yaml:6: hosts.load: \"ssh://u@h:70000\": port 70000 is out of range; expected 1 to 65535"},
		{"option at its line", "hosts: {sut: -oProxyCommand=x}\n" + conf, "p.yaml:4: hosts.sut: \"-oProxyCommand=x\" starts with '-'"},
		{"empty", "hosts: {sut: \"\"}\n" + conf, "p.yaml:4: hosts.sut: empty; expected an SSH destination"},
		{"null", "hosts: {sut: }\n" + conf, "p.yaml:4: hosts.sut: expected a string, got an empty value"},
		{"spaces", "hosts: {sut: \"lab sut\"}\n" + conf, "hosts.sut: \"lab sut\" has a space"},
		{"unknown role", "hosts: {db: lab-sut}\n" + conf, "p.yaml:4: hosts.db: unknown key; expected one of \"sut\", \"load\""},
		{"typo of a role", "hosts: {sutt: lab-sut}\n" + conf, `did you mean "sut"?`},
		{"not a mapping", "hosts: lab-sut\n" + conf, "p.yaml:4: hosts: expected a mapping of keys to values"},
		{"configuration's at its line", conf + "    hosts:\n      load: \"root@h:22\"\n",
			"p.yaml:8: configurations[0].hosts.load: \"root@h:22\": ssh takes no port after the host"},
		{"empty ssh_config", "ssh_config: \"\"\n" + conf, "p.yaml:4: ssh_config: empty; expected the path of an ssh config file"},
		{"matrix axis", "configurations:\n  - name: a\n    runtime: host\nmatrix:\n  base: {runtime: docker}\n  hosts.sut: [lab-sut, \"-x\"]\n",
			"p.yaml:9: matrix.hosts.sut[1]: \"-x\" starts with '-'"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(head+tt.body), Options{Schema: testSchema{}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

func TestHostsMatrixAndDescribe(t *testing.T) {
	src := "name: x\nworkload: testweb\nbaseline: docker-local\nmatrix:\n  base: {runtime: docker, hosts: {sut: lab-sut}}\n  hosts.load: [local, lab-load]\n  name: \"docker-{hosts.load}\"\n"
	p, err := Parse("p.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.Config("docker-lab-load")
	if !ok || c.Hosts.String() != "sut=lab-sut load=lab-load" {
		t.Fatalf("configs %v, docker-lab-load %+v", p.Names(), c)
	}
	if d := c.describeKnobs(); !strings.HasSuffix(d, " sut=lab-sut load=lab-load") {
		t.Errorf("describe = %q", d)
	}
	l, _ := p.Config("docker-local")
	if l.Hosts.String() != "sut=lab-sut load=local" {
		t.Errorf("docker-local: %s", l.Hosts)
	}
}
