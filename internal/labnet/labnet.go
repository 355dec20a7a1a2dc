// Package labnet holds the names and addresses of the project's own test
// machines on this one, the lab's SSH hosts and the lab cluster, written
// once in labnet.env, which scripts/lab.sh and scripts/kube.sh source and
// this package embeds for the Go fixtures (internal/lab, internal/kubelab).
package labnet

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed labnet.env
var envFile string

// values are labnet.env's, by name.
var values = mustParse(envFile)

var lineRe = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=([^\s"'$` + "`" + `\\]*)$`)

// parse reads NAME=value lines; blank lines and # comments are skipped. A
// value is a shell word that needs no quoting or expansion, so that the
// shell and this parser read it alike; anything else is an error.
func parse(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := lineRe.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("labnet.env:%d: %q is not NAME=value (a value without quotes, spaces or $)", i+1, line)
		}
		if _, dup := out[m[1]]; dup {
			return nil, fmt.Errorf("labnet.env:%d: %s set twice", i+1, m[1])
		}
		out[m[1]] = m[2]
	}
	return out, nil
}

func mustParse(s string) map[string]string {
	v, err := parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Get is the value of name; a name labnet.env lacks is a programming error
// and panics (at package initialisation, where the fixtures read them).
func Get(name string) string {
	v, ok := values[name]
	if !ok {
		panic("labnet: labnet.env has no " + name)
	}
	return v
}
