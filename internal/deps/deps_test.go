package deps

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		desc, in string
		want     []Package
		err      string
	}{
		{"comments and blank lines are skipped", "# c\n\n# package sets commands why\n", nil, ""},
		{"dashes are empty columns", "wrk - wrk reference load\n",
			[]Package{{Name: "wrk", Commands: []string{"wrk"}, Why: "reference load"}}, ""},
		{"several sets and commands", "docker.io engine,lab dockerd,docker the engine (make demo)\nlibc6-dev - - headers\n",
			[]Package{{Name: "docker.io", Sets: []string{"engine", "lab"}, Commands: []string{"dockerd", "docker"}, Why: "the engine (make demo)"},
				{Name: "libc6-dev", Why: "headers"}}, ""},
		{"a line without its why", "fio - fio\n", nil, "packages.txt:1: want package, sets, commands and why"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Name != w.Name || g.Why != w.Why || !slices.Equal(g.Sets, w.Sets) || !slices.Equal(g.Commands, w.Commands) {
					t.Errorf("line %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestEmbeddedList: the shipped list parses, names each package once, uses
// only the sets bootstrap.sh knows, and the demo's set is the engine alone.
func TestEmbeddedList(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if seen[p.Name] {
			t.Errorf("%s listed twice", p.Name)
		}
		seen[p.Name] = true
		for _, s := range p.Sets {
			if !slices.Contains([]string{SetEngine, SetBaseImage, SetLab, SetKube}, s) {
				t.Errorf("%s: unknown set %q", p.Name, s)
			}
		}
	}
	var engine []string
	for _, p := range InSet(SetEngine) {
		engine = append(engine, p.Name)
	}
	if !slices.Equal(engine, []string{"docker.io", "iptables"}) {
		t.Errorf("engine set = %v, want docker.io iptables (make demo installs no more)", engine)
	}
	if p, ok := Providing("debootstrap"); !ok || p.Name != "debootstrap" || !slices.Contains(p.Sets, SetBaseImage) {
		t.Errorf("Providing(debootstrap) = %+v, %v", p, ok)
	}
}

// TestBootstrapReadsTheSameList: scripts/bootstrap.sh --check --for SET
// counts the packages of that set in this list (it reads the file, not a
// copy of its own).
func TestBootstrapReadsTheSameList(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("not Debian: bootstrap.sh refuses to run")
	}
	for _, set := range []string{SetEngine, SetBaseImage, SetLab, SetKube} {
		out, _ := exec.Command("bash", "../../scripts/bootstrap.sh", "--check", "--for", set).CombinedOutput()
		var names []string
		for _, p := range InSet(set) {
			names = append(names, p.Name)
		}
		s := string(out)
		// Either all present ("N Debian package(s)") or the missing ones named.
		if !strings.Contains(s, " for "+set) {
			t.Errorf("--for %s: %q does not name the set", set, s)
		}
		if strings.Contains(s, "all present") && !strings.Contains(s, "("+strconv.Itoa(len(names))+" Debian package") {
			t.Errorf("--for %s: %q, want %d packages (%v)", set, s, len(names), names)
		}
	}
}
