package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ctrperf/internal/plan"
	"ctrperf/plans"
)

// PlanSource says where a plan named on the command line came from.
type PlanSource struct {
	Arg     string // what the user wrote
	Path    string // the file read, when it was a file
	Builtin string // the built-in plan's name, when it was one
	// Shadows is set when a file was read although a built-in plan has
	// the same name.
	Shadows bool
}

func (s PlanSource) String() string {
	switch {
	case s.Builtin != "":
		return fmt.Sprintf("built-in plan %s (no file %s here; `ctrperf plans show %s` prints it)", s.Builtin, s.Arg, s.Builtin)
	case s.Shadows:
		return fmt.Sprintf("plan file %s (not the built-in plan of that name)", s.Path)
	default:
		return "plan file " + s.Path
	}
}

// OpenPlan reads the plan arg names: the file arg when it exists (a file
// always wins), else the built-in plan of that name when arg is a bare name
// ("smoke", "smoke.yaml") or the repository's path of one
// ("plans/smoke.yaml"), so that a command written for the source tree works
// from any directory.
func OpenPlan(arg string, opt plan.Options) (*plan.Plan, PlanSource, error) {
	src := PlanSource{Arg: arg}
	data, err := os.ReadFile(arg)
	if err == nil {
		src.Path = arg
		_, src.Shadows = builtinFor(arg)
		p, err := ParsePlan(arg, data, opt)
		return p, src, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if name, ok := builtinFor(arg); ok {
			b, _ := plans.Read(name)
			src.Builtin = name
			p, err := ParsePlan("built-in:"+plans.FileName(name), b, opt)
			return p, src, err
		}
		return nil, src, fmt.Errorf("read plan: %w (nor is it a built-in plan: `ctrperf plans list`)", err)
	}
	return nil, src, fmt.Errorf("read plan: %w", err)
}

// builtinFor is the built-in plan a command-line argument may name.
func builtinFor(arg string) (string, bool) {
	dir, base := filepath.Split(filepath.Clean(arg))
	if d := filepath.Clean(dir); dir != "" && d != "plans" && d != "." {
		return "", false
	}
	if _, ok := plans.Read(base); !ok {
		return "", false
	}
	return filepath.Base(base[:len(base)-len(filepath.Ext(base))]), true
}
