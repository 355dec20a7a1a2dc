package workload

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/load"
	"ctrperf/internal/plan"
)

// knobs reads a free-form knob map (a plan's app: or load:) with type and
// range checks. Every problem is kept, so a plan's errors are listed at
// once, and unknown keys are errors that name the known ones: a typo must
// not silently run the default.
type knobs struct {
	what string
	m    map[string]any
	used map[string]bool
	errs []error
}

func newKnobs(what string, m map[string]any) *knobs {
	return &knobs{what: what, m: m, used: map[string]bool{}}
}

func (k *knobs) get(key string) (any, bool) {
	k.used[key] = true
	v, ok := k.m[key]
	return v, ok && v != nil
}

func (k *knobs) fail(key string, v any, format string, args ...any) {
	k.errs = append(k.errs, knobError(k.what+"."+key, "%s.%s = %v: %s", k.what, key, v, fmt.Sprintf(format, args...)))
}

// knobError is a problem with one knob ("app.pool"), which the plan reports
// at the line that set it.
func knobError(knob, format string, args ...any) error {
	return &plan.KnobError{Knob: knob, Err: fmt.Errorf(format, args...)}
}

// whole reads a whole number in [lo, hi]. YAML gives int; JSON (a plan as
// run, re-read) may give float64 or int64.
func whole[T ~int | ~int64](k *knobs, key string, dst *T, lo, hi T) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		n = int64(x)
	case float64:
		if x != float64(int64(x)) {
			k.fail(key, v, "want a whole number")
			return
		}
		n = int64(x)
	default:
		k.fail(key, v, "want a whole number")
		return
	}
	if n < int64(lo) || n > int64(hi) {
		k.fail(key, v, "out of range [%d, %d]", lo, hi)
		return
	}
	*dst = T(n)
}

func (k *knobs) float(key string, dst *float64, lo, hi float64) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case float64:
		f = x
	default:
		k.fail(key, v, "want a number")
		return
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		k.fail(key, v, "want a finite number")
		return
	}
	if f < lo || f > hi {
		k.fail(key, v, "out of range [%g, %g]", lo, hi)
		return
	}
	*dst = f
}

// rate reads an open-loop rate: 0 (no open loop; the workload decides
// whether that is allowed) or a rate within the bounds `ctrperf load
// --rate` has too (load.MinRate, load.MaxRate), shared by every workload.
func (k *knobs) rate(key string, dst *float64) {
	f := *dst
	before := len(k.errs)
	k.float(key, &f, -math.MaxFloat64, math.MaxFloat64) // a finite number
	if len(k.errs) > before {
		return
	}
	if f != 0 && (f < load.MinRate || f > load.MaxRate) {
		k.fail(key, k.m[key], "want between %g and %g per second (or 0 for none)", load.MinRate, load.MaxRate)
		return
	}
	*dst = f
}

// seed reads the seed of arrivals and random choices: a whole number the
// generator takes as a uint64.
func (k *knobs) seed(key string, dst *uint64) {
	var n int64
	before := len(k.errs)
	whole(k, key, &n, 0, 1<<62)
	if _, set := k.m[key]; set && len(k.errs) == before {
		*dst = uint64(n)
	}
}

func (k *knobs) bool(key string, dst *bool) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	b, isBool := v.(bool)
	if !isBool {
		k.fail(key, v, "want true or false")
		return
	}
	*dst = b
}

func (k *knobs) duration(key string, dst *time.Duration, lo, hi time.Duration) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	var d time.Duration
	switch x := v.(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(x); err != nil {
			k.fail(key, v, "want a duration like 60s")
			return
		}
	case time.Duration:
		d = x
	default:
		k.fail(key, v, "want a duration like 60s")
		return
	}
	if d < lo || d > hi {
		k.fail(key, v, "out of range [%s, %s]", lo, hi)
		return
	}
	*dst = d
}

// enum reads a string that must be one of valid.
func (k *knobs) enum(key string, dst *string, valid ...string) {
	k.str(key, dst, func(s string) error {
		for _, x := range valid {
			if s == x {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(valid, ", "))
	})
}

// str reads any string accepted by check (nil: any).
func (k *knobs) str(key string, dst *string, check func(string) error) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		k.fail(key, v, "want a string")
		return
	}
	if check != nil {
		if err := check(s); err != nil {
			k.fail(key, v, "%v", err)
			return
		}
	}
	*dst = s
}

// size reads a byte size: a number of bytes or a string with a K, M or G
// suffix (powers of 1024), as fio and MariaDB write them.
func (k *knobs) size(key string, dst *int64, lo, hi int64) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	var n int64
	var err error
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case float64:
		n = int64(x)
	case string:
		n, err = parseSize(x)
	default:
		err = errors.New("want a size like 64M")
	}
	if err != nil {
		k.fail(key, v, "%v", err)
		return
	}
	if n < lo || n > hi {
		k.fail(key, v, "out of range [%s, %s]", fmtSize(lo), fmtSize(hi))
		return
	}
	*dst = n
}

// err is every problem found, unknown keys last with the known ones named.
func (k *knobs) err() error {
	var unknown, known []string
	for key := range k.m {
		if !k.used[key] {
			unknown = append(unknown, key)
		}
	}
	for key := range k.used {
		known = append(known, key)
	}
	sort.Strings(unknown)
	sort.Strings(known)
	for _, key := range unknown {
		k.errs = append(k.errs, knobError(k.what+"."+key, "%s.%s: unknown knob (known: %s)", k.what, key, strings.Join(known, ", ")))
	}
	return errors.Join(k.errs...)
}

// scalarString renders a YAML scalar (a string, a number, a boolean) as
// the string a command line or environment gets.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), true
	}
	return "", false
}

// strList reads a list of strings (numbers are written as they read), such
// as an argv.
func (k *knobs) strList(key string, dst *[]string) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	items, isList := v.([]any)
	if !isList || len(items) == 0 {
		k.fail(key, v, "want a non-empty list of arguments, like [serve, --port, \"{{port:app:8080}}\"]")
		return
	}
	out := make([]string, len(items))
	for i, it := range items {
		s, ok := scalarString(it)
		if !ok {
			k.fail(fmt.Sprintf("%s[%d]", key, i), it, "want a string")
			return
		}
		out[i] = s
	}
	*dst = out
}

// intList reads a list of whole numbers in [lo, hi].
func (k *knobs) intList(key string, dst *[]int64, lo, hi int64) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	items, isList := v.([]any)
	if !isList {
		k.fail(key, v, "want a list of numbers")
		return
	}
	sub := newKnobs(k.what, map[string]any{})
	var out []int64
	for i, it := range items {
		var n int64
		name := fmt.Sprintf("%s[%d]", key, i)
		sub.m[name] = it
		whole(sub, name, &n, lo, hi)
		out = append(out, n)
	}
	if len(sub.errs) > 0 {
		k.errs = append(k.errs, sub.errs...)
		return
	}
	*dst = out
}

// strMap reads a mapping of names to strings (numbers and booleans are
// written as they read), such as an environment.
func (k *knobs) strMap(key string, dst *map[string]string) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail(key, v, "want a mapping of NAME: value")
		return
	}
	out := make(map[string]string, len(m))
	for name, it := range m {
		s, ok := scalarString(it)
		if !ok || name == "" || strings.ContainsAny(name, "= \t\n") {
			k.fail(key+"."+name, it, "want NAME: value with a plain value")
			continue
		}
		out[name] = s
	}
	*dst = out
}

// sub reads a nested mapping, such as app.ready.
func (k *knobs) sub(key string) (map[string]any, bool) {
	v, ok := k.get(key)
	if !ok {
		return nil, false
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail(key, v, "want a mapping")
		return nil, false
	}
	return m, true
}

// subList reads a list of mappings, such as app.sidecars.
func (k *knobs) subList(key string) []map[string]any {
	v, ok := k.get(key)
	if !ok {
		return nil
	}
	items, isList := v.([]any)
	if !isList {
		k.fail(key, v, "want a list of mappings")
		return nil
	}
	var out []map[string]any
	for i, it := range items {
		m, isMap := it.(map[string]any)
		if !isMap {
			k.fail(fmt.Sprintf("%s[%d]", key, i), it, "want a mapping")
			continue
		}
		out = append(out, m)
	}
	return out
}

// CommandLine is a command as a plan writes it: a string, run with
// /bin/sh -c so that pipes, redirections and variables work, or a list,
// run as that argv without a shell.
type CommandLine struct {
	Shell string   // run with /bin/sh -c; "" when Argv is set
	Argv  []string // run as is
}

// IsZero reports whether no command was given.
func (c CommandLine) IsZero() bool { return c.Shell == "" && len(c.Argv) == 0 }

// argv is what to execute.
func (c CommandLine) argv() []string {
	if c.Shell != "" {
		return []string{"/bin/sh", "-c", c.Shell}
	}
	return slices.Clone(c.Argv)
}

// String is the command as the plan wrote it, for messages.
func (c CommandLine) String() string {
	if c.Shell != "" {
		return c.Shell
	}
	q := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]{}~#") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

// command reads a CommandLine: a non-blank string, or a list of strings
// (numbers are written as YAML wrote them) whose first one is not empty.
func (k *knobs) command(key string, dst *CommandLine) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			k.fail(key, v, "empty command")
			return
		}
		*dst = CommandLine{Shell: x}
	case []any:
		if len(x) == 0 {
			k.fail(key, v, "empty command")
			return
		}
		argv := make([]string, len(x))
		for i, a := range x {
			switch y := a.(type) {
			case string:
				argv[i] = y
			case int, int64, uint64, float64, bool:
				argv[i] = fmt.Sprint(y)
			default:
				k.fail(key, v, "argument %d is %T; want a string", i+1, a)
				return
			}
		}
		if strings.TrimSpace(argv[0]) == "" {
			k.fail(key, v, "the program (first element) is empty")
			return
		}
		*dst = CommandLine{Argv: argv}
	default:
		k.fail(key, v, "want a command: a string (run with sh -c) or a list (an argv)")
	}
}

// envVarName is what a POSIX shell accepts as a variable name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env reads a mapping of environment variables; scalar values are written
// as YAML wrote them, and names must be valid shell variable names.
func (k *knobs) env(key string, dst *map[string]string, reserved ...string) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail(key, v, "want a mapping of variable names to values")
		return
	}
	out := make(map[string]string, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !envVarName.MatchString(name) {
			k.fail(key, v, "%q is not a variable name (letters, digits and _, not starting with a digit)", name)
			return
		}
		if slices.Contains(reserved, name) {
			k.fail(key, v, "%s is set by ctrperf", name)
			return
		}
		switch y := m[name].(type) {
		case string:
			out[name] = y
		case int, int64, uint64, float64, bool:
			out[name] = fmt.Sprint(y)
		case nil:
			out[name] = ""
		default:
			k.fail(key, v, "%s: want a string, not %T", name, y)
			return
		}
	}
	*dst = out
}
