package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is what one session does: labelled HTTP steps in order.
type Scenario struct {
	Name    string            `yaml:"name,omitempty" json:"name,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	Steps   []Step            `yaml:"steps" json:"steps"`
}

// Step is one request of a session.
type Step struct {
	Label   string            `yaml:"label" json:"label"`
	Method  string            `yaml:"method,omitempty" json:"method,omitempty"`
	Path    string            `yaml:"path" json:"path"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	Form    map[string]string `yaml:"form,omitempty" json:"form,omitempty"`
	Body    string            `yaml:"body,omitempty" json:"body,omitempty"`
	// Expect is the status the step must answer; 0 accepts any status < 400.
	Expect int `yaml:"expect,omitempty" json:"expect,omitempty"`
	// Extract maps a variable name to a regexp with one capturing group that
	// is matched against the response body.
	Extract         map[string]string `yaml:"extract,omitempty" json:"extract,omitempty"`
	FollowRedirects *bool             `yaml:"follow_redirects,omitempty" json:"follow_redirects,omitempty"`
	Think           time.Duration     `yaml:"think,omitempty" json:"think,omitempty"`
}

// builtinVars are always defined.
var builtinVars = map[string]bool{"vu": true, "session": true, "rand": true}

var varRef = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// SingleGET is the scenario of a plain URL: one GET step labelled by its path.
func SingleGET(path string) *Scenario {
	if path == "" {
		path = "/"
	}
	return &Scenario{Steps: []Step{{Label: "GET " + path, Method: http.MethodGet, Path: path}}}
}

// LoadScenarioFile reads and validates a scenario file.
func LoadScenarioFile(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	defer f.Close()
	sc, err := ParseScenario(f)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// ParseScenario decodes a YAML scenario strictly (unknown keys are errors)
// and validates it.
func ParseScenario(r io.Reader) (*Scenario, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

// Validate checks the scenario before any load starts: labels present and
// unique, methods known, regexps compile with one group, and every {{var}}
// is a built-in or extracted by an earlier step. It fills in defaults.
func (sc *Scenario) Validate() error {
	if len(sc.Steps) == 0 {
		return errors.New("scenario has no steps")
	}
	defined := map[string]bool{}
	for k := range builtinVars {
		defined[k] = true
	}
	seen := map[string]bool{}
	for k, v := range sc.Headers {
		if err := checkRefs(v, defined); err != nil {
			return fmt.Errorf("scenario header %s: %w", k, err)
		}
	}
	for i := range sc.Steps {
		st := &sc.Steps[i]
		where := fmt.Sprintf("step %d (%q)", i+1, st.Label)
		if st.Label == "" {
			return fmt.Errorf("step %d: label is required", i+1)
		}
		if seen[st.Label] {
			return fmt.Errorf("%s: label used twice; labels name the rows of the report", where)
		}
		seen[st.Label] = true
		if st.Method == "" {
			st.Method = http.MethodGet
		}
		st.Method = strings.ToUpper(st.Method)
		switch st.Method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		default:
			return fmt.Errorf("%s: unknown method %q", where, st.Method)
		}
		if !strings.HasPrefix(st.Path, "/") {
			return fmt.Errorf("%s: path %q must start with /", where, st.Path)
		}
		if st.Body != "" && len(st.Form) > 0 {
			return fmt.Errorf("%s: give either form or body, not both", where)
		}
		if st.Expect != 0 && (st.Expect < 100 || st.Expect > 599) {
			return fmt.Errorf("%s: expect %d is not an HTTP status", where, st.Expect)
		}
		if st.Think < 0 {
			return fmt.Errorf("%s: think %v is negative", where, st.Think)
		}
		check := func(what, s string) error {
			if err := checkRefs(s, defined); err != nil {
				return fmt.Errorf("%s: %s: %w", where, what, err)
			}
			return nil
		}
		if err := check("path", st.Path); err != nil {
			return err
		}
		if err := check("body", st.Body); err != nil {
			return err
		}
		for k, v := range st.Form {
			if err := check("form field "+k, v); err != nil {
				return err
			}
		}
		for k, v := range st.Headers {
			if err := check("header "+k, v); err != nil {
				return err
			}
		}
		// Variables a step extracts are usable from the next step on.
		for name, expr := range st.Extract {
			re, err := regexp.Compile(expr)
			if err != nil {
				return fmt.Errorf("%s: extract %s: %w", where, name, err)
			}
			if re.NumSubexp() != 1 {
				return fmt.Errorf("%s: extract %s: regexp %q must have exactly one group, has %d", where, name, expr, re.NumSubexp())
			}
			if builtinVars[name] {
				return fmt.Errorf("%s: extract %s: %q is a built-in variable", where, name, name)
			}
		}
		for name := range st.Extract {
			defined[name] = true
		}
	}
	return nil
}

// Labels returns the step labels in order.
func (sc *Scenario) Labels() []string {
	l := make([]string, len(sc.Steps))
	for i, s := range sc.Steps {
		l[i] = s.Label
	}
	return l
}

func checkRefs(s string, defined map[string]bool) error {
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		if !defined[m[1]] {
			return fmt.Errorf("references {{%s}}, which no earlier step extracts (built-ins: vu, session, rand)", m[1])
		}
	}
	return nil
}

// expand substitutes {{name}} references. Validation guarantees every name
// is defined; a missing one at run time (an extraction that did not match
// aborts the session before) expands to "".
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		return vars[name]
	})
}

// compiledStep is a Step with its regexps compiled once.
type compiledStep struct {
	Step
	extract []extraction
	follow  bool
}

type extraction struct {
	name string
	re   *regexp.Regexp
}

func compileScenario(sc *Scenario) ([]compiledStep, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	out := make([]compiledStep, len(sc.Steps))
	for i, st := range sc.Steps {
		cs := compiledStep{Step: st, follow: st.FollowRedirects == nil || *st.FollowRedirects}
		for name, expr := range st.Extract {
			cs.extract = append(cs.extract, extraction{name: name, re: regexp.MustCompile(expr)})
		}
		out[i] = cs
	}
	return out, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
