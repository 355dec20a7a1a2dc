package engine

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Bindings is what templates resolve against: for each service, the ports it
// really listens on, the host name other services reach it by, and its data
// directory as its own process sees it.
type Bindings map[string]ServiceBinding

// ServiceBinding is one service's entry in Bindings.
type ServiceBinding struct {
	// Host is how other services reach this one: the container name on a
	// docker bridge network, 127.0.0.1 when everything shares the host's ports.
	Host string
	// Ports maps a declared port to the port the service really listens on.
	// A declared port missing from the map listens unchanged when
	// PortsIdentity is set (own network namespace), and is an error otherwise.
	Ports         map[int]int
	PortsIdentity bool
	DataDir       string
	// Listen, when set, is where a service that shares the host's network
	// listens instead of 127.0.0.1: the front service of a spec with Reach.
	Listen string
}

// reach makes the front service of a shared network namespace listen on
// the address the load host dials (spec.Reach); the others stay on
// loopback.
func (b Bindings) reach(spec DeploySpec) {
	if !spec.Reach.Valid() || len(spec.Services) == 0 {
		return
	}
	sb := b[spec.Services[0].Name]
	if sb.PortsIdentity {
		return
	}
	sb.Listen = spec.Reach.Addr.String()
	b[spec.Services[0].Name] = sb
}

// listenHost is where service svc is dialled on its own host: its Listen
// address, else loopback.
func (b Bindings) listenHost(svc string) string {
	if l := b[svc].Listen; l != "" {
		return l
	}
	return "127.0.0.1"
}

var templateRe = regexp.MustCompile(`\{\{\s*(port|addr|host|data|listen)\s*:\s*([^}:\s]+)\s*(?::\s*([0-9]+)\s*)?\}\}`)

// portRefRe finds the {{port:SVC:PORT}} references, used to decide which
// ports a service on a shared network namespace wants relocated.
var portRefRe = regexp.MustCompile(`\{\{\s*port\s*:\s*([^}:\s]+)\s*:\s*([0-9]+)\s*\}\}`)

// Expand substitutes {{port:SVC:PORT}}, {{addr:SVC:PORT}} and {{data:SVC}}
// in s. An unknown service, a missing port or a malformed template is an
// error naming it, never a silent pass-through.
func (b Bindings) Expand(s string) (string, error) {
	var firstErr error
	out := templateRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := templateRe.FindStringSubmatch(m)
		kind, svc, portStr := sub[1], sub[2], sub[3]
		v, err := b.resolve(kind, svc, portStr)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("template %s: %w", m, err)
			}
			return m
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	if i := strings.Index(out, "{{"); i >= 0 && templateLike(out[i:]) {
		return "", fmt.Errorf("malformed template in %q (want {{port:SVC:PORT}}, {{addr:SVC:PORT}}, {{host:SVC}}, {{data:SVC}} or {{listen:SVC}})", s)
	}
	return out, nil
}

// Reference is one template in a string: its kind (port, addr, host,
// data, listen), the service it names and the port, 0 when it has none.
type Reference struct {
	Kind, Service string
	Port          int
	Text          string // as written
}

// References lists the templates of s, for checks made before anything
// is deployed (a client command's, when the plan is read). A malformed
// one is an error, as Expand would give.
func References(s string) ([]Reference, error) {
	var out []Reference
	for _, m := range templateRe.FindAllStringSubmatch(s, -1) {
		r := Reference{Kind: m[1], Service: m[2], Text: m[0]}
		if m[3] != "" {
			p, err := strconv.Atoi(m[3])
			if err != nil || p <= 0 || p > 65535 {
				return nil, fmt.Errorf("template %s: bad port %q", m[0], m[3])
			}
			r.Port = p
		}
		out = append(out, r)
	}
	rest := templateRe.ReplaceAllString(s, "")
	if i := strings.Index(rest, "{{"); i >= 0 && templateLike(rest[i:]) {
		return nil, fmt.Errorf("malformed template in %q (want {{port:SVC:PORT}}, {{addr:SVC:PORT}} or {{host:SVC}})", s)
	}
	return out, nil
}

// templateLike reports whether the rest of a string starts like one of our
// templates, so that unrelated "{{" (e.g. a Go template in an argument) passes.
func templateLike(s string) bool {
	s = strings.TrimSpace(strings.TrimPrefix(s, "{{"))
	for _, k := range []string{"port", "addr", "host", "data", "listen"} {
		if strings.HasPrefix(s, k) && strings.HasPrefix(strings.TrimSpace(s[len(k):]), ":") {
			return true
		}
	}
	return false
}

func (b Bindings) resolve(kind, svc, portStr string) (string, error) {
	sb, ok := b[svc]
	if !ok {
		return "", fmt.Errorf("unknown service %q (deployment has %s)", svc, strings.Join(b.names(), ", "))
	}
	if kind == "listen" {
		if portStr != "" {
			return "", fmt.Errorf("listen takes no port")
		}
		if sb.PortsIdentity {
			return "0.0.0.0", nil // its own network namespace
		}
		if sb.Listen != "" {
			return sb.Listen, nil // the address the load host dials, and only that one
		}
		return "127.0.0.1", nil // the host's: never the machine's real interfaces
	}
	if kind == "host" {
		if portStr != "" {
			return "", fmt.Errorf("host takes no port ({{host:%s}})", svc)
		}
		return sb.Host, nil
	}
	if kind == "data" {
		if portStr != "" {
			return "", fmt.Errorf("data takes no port")
		}
		if sb.DataDir == "" {
			return "", fmt.Errorf("service %q has no DataDir", svc)
		}
		return sb.DataDir, nil
	}
	if portStr == "" {
		return "", fmt.Errorf("%s needs a port ({{%s:%s:PORT}})", kind, kind, svc)
	}
	declared, err := strconv.Atoi(portStr)
	if err != nil || declared <= 0 || declared > 65535 {
		return "", fmt.Errorf("bad port %q", portStr)
	}
	p, err := sb.port(svc, declared)
	if err != nil {
		return "", err
	}
	if kind == "port" {
		return strconv.Itoa(p), nil
	}
	return net.JoinHostPort(sb.Host, strconv.Itoa(p)), nil
}

func (sb ServiceBinding) port(svc string, declared int) (int, error) {
	if p, ok := sb.Ports[declared]; ok {
		return p, nil
	}
	if sb.PortsIdentity {
		return declared, nil
	}
	return 0, fmt.Errorf("service %q does not declare port %d in Ports", svc, declared)
}

func (b Bindings) names() []string {
	var n []string
	for k := range b {
		n = append(n, k)
	}
	sortStrings(n)
	return n
}

// ExpandAll expands every element of argv.
func (b Bindings) ExpandAll(argv []string) ([]string, error) {
	if argv == nil {
		return nil, nil
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		v, err := b.Expand(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// ExpandEnv expands every value of env.
func (b Bindings) ExpandEnv(env map[string]string) (map[string]string, error) {
	if env == nil {
		return nil, nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		e, err := b.Expand(v)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

// RelocatedPorts returns the declared ports of svc that its own argv or env
// references as {{port:svc:PORT}}: on a shared network namespace those get a
// free port of their own; the others stay where the program listens anyway
// and must be free.
func RelocatedPorts(svc Service, argv []string) map[int]bool {
	out := map[int]bool{}
	scan := func(s string) {
		for _, m := range portRefRe.FindAllStringSubmatch(s, -1) {
			if m[1] != svc.Name {
				continue
			}
			if p, err := strconv.Atoi(m[2]); err == nil {
				out[p] = true
			}
		}
	}
	for _, a := range argv {
		scan(a)
	}
	for _, v := range svc.Env {
		scan(v)
	}
	return out
}

// envList renders env as sorted KEY=VALUE pairs, stable for tests and logs.
func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sortStrings(out)
	return out
}

// Check expands every template of the services (argv chosen by argvOf) so
// that a bad one fails the deploy before anything is created.
func (b Bindings) Check(services []Service, argvOf func(Service) []string) error {
	for _, s := range services {
		if _, err := b.ExpandAll(argvOf(s)); err != nil {
			return fmt.Errorf("service %q command: %w", s.Name, err)
		}
		if _, err := b.ExpandEnv(s.Env); err != nil {
			return fmt.Errorf("service %q: %w", s.Name, err)
		}
	}
	return nil
}
