package plan

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A plan's hosts: say where the system under test runs (sut: its engine,
// the bare-metal baseline, the samplers, the isolate controller) and where
// the load generator runs (load), each an SSH destination as people write
// them; both default to this machine.
//
//	ssh_config: /var/lib/ctrperf/lab/ssh_config   # plan level only
//	hosts: {sut: lab-sut, load: lab-load}          # plan level
//	configurations:
//	  - name: local-load
//	    hosts: {load: local}                        # per configuration, merged like app:
//
// A destination is a Host alias of the ssh config ("lab-sut"), user@addr,
// or ssh://user@addr:port; "local" is this machine. Only the syntax is
// checked here (nothing a destination holds may reach ssh as an option);
// what ssh makes of it (HostName, User, Port, IdentityFile, ProxyJump) is
// internal/sshdest's Resolve, and reaching the host is internal/remote's.

// LocalHost is what a plan writes for this machine, to override a
// plan-level host in one configuration.
const LocalHost = "local"

// Dest is an SSH destination as a plan or --hosts wrote it. The zero value
// is this machine.
type Dest struct {
	// Raw is the destination as written; it names the host in records and
	// in the canonical plan.
	Raw string
	// User, Host and Port are what Raw spells out (Port 0: ssh's, from the
	// config or 22); Host of an alias is the alias.
	User string
	Host string
	Port int
}

// Local says the destination is this machine.
func (d Dest) Local() bool { return d.Raw == "" || d.Raw == LocalHost }

// String is the destination as written, "local" for this machine.
func (d Dest) String() string {
	if d.Local() {
		return LocalHost
	}
	return d.Raw
}

// SSHArgs are the arguments that make ssh (or ssh -G) reach d: options for
// the user and port it spells out, then "--" and the host, so nothing of
// it can be read as an option. A remote command goes after them.
func (d Dest) SSHArgs() []string {
	var args []string
	if d.User != "" {
		args = append(args, "-l", d.User)
	}
	if d.Port != 0 {
		args = append(args, "-p", strconv.Itoa(d.Port))
	}
	return append(args, "--", d.Host)
}

var (
	// hostRE: a Host alias, a DNS name, an IPv4 address, or an IPv6
	// address in brackets (ssh:// form) or bare.
	hostRE = regexp.MustCompile(`^(\[[0-9A-Fa-f:.%a-zA-Z]+\]|[A-Za-z0-9_][A-Za-z0-9_.:%-]*)$`)
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

// ParseDest checks a destination: a Host alias, user@addr,
// ssh://[user@]addr[:port], or "local". The error says what is wrong and
// what is expected.
func ParseDest(s string) (Dest, error) {
	if s == "" {
		return Dest{}, errors.New("empty; expected an SSH destination (a Host alias of the ssh config, user@addr or ssh://user@addr:port) or local")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return Dest{}, fmt.Errorf("%q has a space or control character; expected one SSH destination (a Host alias, user@addr or ssh://user@addr:port)", s)
	}
	if strings.HasPrefix(s, "-") {
		return Dest{}, fmt.Errorf("%q starts with '-', which ssh would take for an option; expected a Host alias, user@addr or ssh://user@addr:port", s)
	}
	if s == LocalHost {
		return Dest{Raw: s}, nil
	}
	if strings.Contains(s, "://") {
		return parseDestURL(s)
	}
	d := Dest{Raw: s, Host: s}
	if user, host, ok := strings.Cut(s, "@"); ok {
		if !userRE.MatchString(user) {
			return Dest{}, fmt.Errorf("%q: user %q is not a user name; expected user@addr", s, user)
		}
		d.User, d.Host = user, host
	}
	if d.Host == "" {
		return Dest{}, fmt.Errorf("%q has no host; expected user@addr", s)
	}
	if strings.Count(d.Host, ":") == 1 {
		// scp's user@host:path, or a port where ssh takes none.
		return Dest{}, fmt.Errorf("%q: ssh takes no port after the host; write ssh://%s to give one", s, s)
	}
	if !hostRE.MatchString(d.Host) {
		return Dest{}, fmt.Errorf("%q: host %q is not a host name, address or Host alias (letters, digits, '.', '-', '_', ':' for IPv6)", s, d.Host)
	}
	return d, nil
}

func parseDestURL(s string) (Dest, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Dest{}, fmt.Errorf("%q is not a valid URL (%v); expected ssh://user@addr:port", s, unwrapURL(err))
	}
	if u.Scheme != "ssh" {
		return Dest{}, fmt.Errorf("%q: scheme %q; the only URL ssh takes is ssh://user@addr:port", s, u.Scheme)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return Dest{}, fmt.Errorf("%q: an ssh:// destination has no path, query or fragment; expected ssh://user@addr:port", s)
	}
	d := Dest{Raw: s, Host: u.Hostname()}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return Dest{}, fmt.Errorf("%q holds a password; ctrperf logs in with keys only (IdentityFile in the ssh config, or ssh-agent)", s)
		}
		d.User = u.User.Username()
		if !userRE.MatchString(d.User) {
			return Dest{}, fmt.Errorf("%q: user %q is not a user name", s, d.User)
		}
	}
	if d.Host == "" {
		return Dest{}, fmt.Errorf("%q has no host; expected ssh://user@addr:port", s)
	}
	if strings.HasPrefix(d.Host, "-") || !hostRE.MatchString(d.Host) {
		return Dest{}, fmt.Errorf("%q: host %q is not a host name or address", s, d.Host)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Dest{}, fmt.Errorf("%q: port %s is out of range; expected 1 to 65535", s, p)
		}
		d.Port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return Dest{}, fmt.Errorf("%q: empty port; expected ssh://user@addr:port or no colon", s)
	}
	return d, nil
}

// unwrapURL drops url.Error's repetition of the operation and the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Hosts are the hosts of a configuration (or a plan): where the system
// under test runs and where the load generator runs. The zero value is
// everything on this machine.
type Hosts struct {
	SUT  Dest
	Load Dest
}

// Remote says some role runs on another host.
func (h Hosts) Remote() bool { return !h.SUT.Local() || !h.Load.Local() }

// String is "sut=lab-sut load=lab-load", "local" for roles of this machine.
func (h Hosts) String() string { return "sut=" + h.SUT.String() + " load=" + h.Load.String() }

// over returns h with the roles o sets (local included) on top.
func (h Hosts) over(o Hosts) Hosts {
	if o.SUT.Raw != "" {
		h.SUT = o.SUT
	}
	if o.Load.Raw != "" {
		h.Load = o.Load
	}
	return h
}

// normal turns an explicit "local" into the zero Dest, once merging is done.
func (h Hosts) normal() Hosts {
	if h.SUT.Local() {
		h.SUT = Dest{}
	}
	if h.Load.Local() {
		h.Load = Dest{}
	}
	return h
}

// HostRoles are the keys of a hosts: mapping and of --hosts.
var HostRoles = []string{"sut", "load"}

// ParseHosts reads --hosts: "sut=lab-sut,load=lab-load" (either role may be
// left out; it keeps the plan's).
func ParseHosts(s string) (Hosts, error) {
	var h Hosts
	if strings.TrimSpace(s) == "" {
		return h, errors.New("--hosts is empty; expected sut=DEST,load=DEST (either may be left out)")
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		role, dest, ok := strings.Cut(item, "=")
		if !ok {
			return Hosts{}, fmt.Errorf("--hosts: %q is not role=destination; expected sut=DEST,load=DEST", item)
		}
		if !contains(HostRoles, role) {
			return Hosts{}, fmt.Errorf("--hosts: unknown role %q; expected %s", role, oneOf(HostRoles))
		}
		if seen[role] {
			return Hosts{}, fmt.Errorf("--hosts: %s given twice", role)
		}
		seen[role] = true
		d, err := ParseDest(dest)
		if err != nil {
			return Hosts{}, fmt.Errorf("--hosts %s: %w", role, err)
		}
		if role == "sut" {
			h.SUT = d
		} else {
			h.Load = d
		}
	}
	return h, nil
}

// setHost sets one role of a configuration's hosts: knob.
func (d *decoder) setHost(k *Knobs, role string, n *yaml.Node, field string) {
	if !contains(HostRoles, role) {
		d.unknownSub(n, field, role, HostRoles)
		return
	}
	k.nodes["hosts."+role] = n
	dest, ok := d.dest(n, field)
	if !ok {
		return
	}
	if role == "sut" {
		k.Hosts.SUT = dest
	} else {
		k.Hosts.Load = dest
	}
}

// setHosts sets a whole hosts: mapping.
func (d *decoder) setHosts(k *Knobs, n *yaml.Node, field string) {
	if pairs, ok := d.mapping(n, field, HostRoles); ok {
		for _, pr := range pairs {
			d.setHost(k, pr.key, pr.value, join(field, pr.key))
		}
	}
}

func (d *decoder) dest(n *yaml.Node, field string) (Dest, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return Dest{}, false
	}
	dest, err := ParseDest(s)
	if err != nil {
		d.errorf(n, field, "%v", err)
		return Dest{}, false
	}
	return dest, true
}

// planHosts reads the plan-level hosts: and ssh_config: into p; the
// command line's ssh config wins.
func (d *decoder) planHosts(p *Plan, top map[string]pair, opt Options) {
	if pr, ok := top["hosts"]; ok {
		var k Knobs
		k.nodes = map[string]*yaml.Node{}
		d.setHosts(&k, pr.value, "hosts")
		p.Hosts = k.Hosts
	}
	if pr, ok := top["ssh_config"]; ok {
		if s, ok := d.str(pr.value, "ssh_config"); ok {
			if s == "" {
				d.errorf(pr.value, "ssh_config", "empty; expected the path of an ssh config file (ssh -F)")
			} else {
				p.SSHConfig = sshConfigPath(s, filepath.Dir(d.file))
			}
		}
	}
	if opt.SSHConfig != "" {
		p.SSHConfig = opt.SSHConfig
	}
}

// sshConfigPath makes a relative ssh config path absolute (relative to
// dir), so the plan as run reads the same file from OUT; "~/" is left for
// ssh's user.
func sshConfigPath(s, dir string) string {
	if filepath.IsAbs(s) || s == "~" || strings.HasPrefix(s, "~/") {
		return s
	}
	if abs, err := filepath.Abs(filepath.Join(dir, s)); err == nil {
		return abs
	}
	return filepath.Join(dir, s)
}

// applyHosts merges the plan's hosts, the configuration's and the command
// line's (each role from the last that sets it).
func (p *Plan) applyHosts(c *Configuration, opt Options) {
	c.Hosts = p.Hosts.over(c.Hosts).over(opt.Hosts).normal()
}

// HasRemote says some configuration of the plan runs a role on another
// host.
func (p *Plan) HasRemote() bool {
	for i := range p.Configurations {
		if p.Configurations[i].Hosts.Remote() {
			return true
		}
	}
	return false
}

// PlanHosts are the distinct hosts of the plan's configurations, in
// configuration order, each with the roles it plays; this machine is left
// out.
func (p *Plan) PlanHosts() []HostUse {
	var out []HostUse
	add := func(d Dest, role string) {
		if d.Local() {
			return
		}
		for i := range out {
			if out[i].Dest.Raw == d.Raw {
				if !contains(out[i].Roles, role) {
					out[i].Roles = append(out[i].Roles, role)
				}
				return
			}
		}
		out = append(out, HostUse{Dest: d, Roles: []string{role}})
	}
	for i := range p.Configurations {
		h := p.Configurations[i].Hosts
		add(h.SUT, "sut")
		add(h.Load, "load")
	}
	return out
}

// HostUse is one host of a plan and the roles it plays.
type HostUse struct {
	Dest  Dest
	Roles []string
}

// canonHosts is hosts: as the canonical plan spells it (roles of this
// machine left out).
type canonHosts struct {
	SUT  string `yaml:"sut,omitempty"`
	Load string `yaml:"load,omitempty"`
}

func canonicalHosts(h Hosts) *canonHosts {
	if !h.Remote() {
		return nil
	}
	c := &canonHosts{}
	if !h.SUT.Local() {
		c.SUT = h.SUT.Raw
	}
	if !h.Load.Local() {
		c.Load = h.Load.Raw
	}
	return c
}

// describe is the hosts part of a configuration's one-line summary.
func (h Hosts) describe() string {
	if !h.Remote() {
		return ""
	}
	return h.String()
}
