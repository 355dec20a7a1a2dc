// Package deps is the one list of the Debian packages ctrperf uses
// (packages.txt, embedded): scripts/bootstrap.sh installs from the same file,
// by set (engine for make demo, base-image, lab, kube; all of them for make
// test and make bootstrap), and `ctrperf doctor` finds each package by the
// commands it provides and says how to install what a plan lacks.
package deps

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

//go:embed packages.txt
var packagesTxt []byte

// Sets of packages, as scripts/bootstrap.sh --for names them.
const (
	SetEngine    = "engine"     // the Docker engine and its NAT: make demo, make engine
	SetBaseImage = "base-image" // debootstrap: the Debian base image
	SetLab       = "lab"        // the lab's SSH hosts: make lab-up
	SetKube      = "kube"       // the lab cluster: make kube-up
)

// Package is one line of the list.
type Package struct {
	Name     string   `json:"name"`
	Sets     []string `json:"sets,omitempty"`     // bootstrap.sh --for sets that install it
	Commands []string `json:"commands,omitempty"` // what it puts on PATH, by which it is found
	Why      string   `json:"why"`
}

var packages = mustParse(packagesTxt)

// All is every package, in the list's order.
func All() []Package { return slices.Clone(packages) }

// InSet is the packages a bootstrap set installs.
func InSet(set string) []Package {
	var out []Package
	for _, p := range packages {
		if slices.Contains(p.Sets, set) {
			out = append(out, p)
		}
	}
	return out
}

// Providing returns the package that provides a command.
func Providing(command string) (Package, bool) {
	for _, p := range packages {
		if slices.Contains(p.Commands, command) {
			return p, true
		}
	}
	return Package{}, false
}

// Named returns a package by name.
func Named(name string) (Package, bool) {
	for _, p := range packages {
		if p.Name == name {
			return p, true
		}
	}
	return Package{}, false
}

// InstallCommand is what installs the packages on Debian, as root.
func InstallCommand(names ...string) string {
	return "apt-get install --no-install-recommends " + strings.Join(names, " ")
}

func mustParse(b []byte) []Package {
	ps, err := parse(b)
	if err != nil {
		panic(err) // the file is embedded: a bad line is found by the tests
	}
	return ps
}

// parse reads the list: "package sets commands why...", "-" for an empty
// column, comma-separated sets and commands, # comments.
func parse(b []byte) ([]Package, error) {
	var out []Package
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("packages.txt:%d: want package, sets, commands and why, got %q", n, line)
		}
		out = append(out, Package{Name: f[0], Sets: list(f[1]), Commands: list(f[2]), Why: strings.Join(f[3:], " ")})
	}
	return out, sc.Err()
}

func list(col string) []string {
	if col == "-" {
		return nil
	}
	return strings.Split(col, ",")
}
