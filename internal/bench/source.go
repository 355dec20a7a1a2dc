package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
	// Passed is set when a bare name read the built-in plan although a
	// file of that name is in the working directory.
	Passed bool
}

func (s PlanSource) String() string {
	switch {
	case s.Passed:
		return fmt.Sprintf("built-in plan %s, not the file %s here (a plan file is named as a path: ./%s)", s.Builtin, s.Arg, s.Arg)
	case s.Builtin != "":
		return fmt.Sprintf("built-in plan %s (`ctrperf plans show %s` prints it)", s.Builtin, s.Builtin)
	case s.Shadows:
		return fmt.Sprintf("plan file %s (not the built-in plan of that name)", s.Path)
	default:
		return "plan file " + s.Path
	}
}

// OpenPlan reads the plan arg names. A bare name ("smoke": no slash, no
// .yaml or .yml suffix) is a built-in plan and never a file: a root
// `bench run smoke` must not run whatever plan (host_command included)
// someone who can write its working directory left there under that name.
// A path ("./smoke", "smoke.yaml", "plans/smoke.yaml") is that file when
// it exists, else the built-in plan it names when it is a plan's file name
// or the repository's path of one, so that a command written for the
// source tree works from any directory.
func OpenPlan(arg string, opt plan.Options) (*plan.Plan, PlanSource, error) {
	src := PlanSource{Arg: arg}
	if !IsPlanPath(arg) {
		if _, ok := plans.Read(arg); !ok {
			msg := fmt.Sprintf("no built-in plan %q (`ctrperf plans list`); a plan file is named as a path, like ./%s or %s.yaml", arg, arg, arg)
			if st, err := os.Stat(arg); err == nil && !st.IsDir() {
				msg = fmt.Sprintf("no built-in plan %q (`ctrperf plans list`); to read the file %s here, name it as a path: ./%s", arg, arg, arg)
			}
			return nil, src, errors.New(msg)
		}
		if st, err := os.Stat(arg); err == nil && !st.IsDir() {
			src.Passed = true
		}
		return openBuiltin(arg, src, opt)
	}
	data, err := os.ReadFile(arg)
	if err == nil {
		src.Path = arg
		_, src.Shadows = builtinFor(arg)
		p, err := ParsePlan(arg, data, opt)
		return p, src, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if name, ok := builtinFor(arg); ok {
			return openBuiltin(name, src, opt)
		}
		return nil, src, fmt.Errorf("read plan: %w (nor is it a built-in plan: `ctrperf plans list`)", err)
	}
	return nil, src, fmt.Errorf("read plan: %w", err)
}

// IsPlanPath says whether a command-line argument names a plan file (it
// has a slash or a .yaml or .yml suffix) rather than a built-in plan.
func IsPlanPath(arg string) bool {
	ext := filepath.Ext(arg)
	return strings.ContainsRune(arg, filepath.Separator) || ext == ".yaml" || ext == ".yml"
}

func openBuiltin(name string, src PlanSource, opt plan.Options) (*plan.Plan, PlanSource, error) {
	b, _ := plans.Read(name)
	src.Builtin = strings.TrimSuffix(name, plans.Ext)
	p, err := ParsePlan("built-in:"+plans.FileName(name), b, opt)
	return p, src, err
}

// builtinFor is the built-in plan a path may name: a plan's file name
// ("smoke.yaml") or the repository's path of one ("plans/smoke.yaml").
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
