// Package plans holds the plan files ctrperf ships (plans/*.yaml), embedded
// in the binary so that `ctrperf bench run smoke` works from any directory,
// with no source tree: a bare name on the command line is one of these, a
// path (a slash or a .yaml/.yml suffix) a file (see bench.OpenPlan).
package plans

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Ext is the extension of a plan file.
const Ext = ".yaml"

// Names lists the built-in plans by name (the file name without .yaml).
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil { // cannot happen: the directory is embedded
		panic(err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, Ext) {
			out = append(out, strings.TrimSuffix(n, Ext))
		}
	}
	sort.Strings(out)
	return out
}

// Read returns the YAML of the built-in plan name ("smoke", or "smoke.yaml").
func Read(name string) ([]byte, bool) {
	name = strings.TrimSuffix(name, Ext)
	if name == "" || strings.ContainsAny(name, `/\`) || name != path.Clean(name) || strings.HasPrefix(name, ".") {
		return nil, false
	}
	b, err := files.ReadFile(name + Ext)
	if err != nil {
		return nil, false
	}
	return b, true
}

// FileName is the name a built-in plan has in the repository and under
// share/ctrperf/plans ("smoke.yaml").
func FileName(name string) string { return strings.TrimSuffix(name, Ext) + Ext }
