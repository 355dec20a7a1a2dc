package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/isolate"
	"ctrperf/plans"
)

var errCaptured = errors.New("options captured")

// isolateOptionsFor runs `isolate run ARGS` up to the start of the
// controller and returns the options it would have started with.
func isolateOptionsFor(t *testing.T, args ...string) isolate.Options {
	t.Helper()
	var got isolate.Options
	cmd := newIsolateRunCmd(func(_ context.Context, _ client.APIClient, o isolate.Options) (controller, error) {
		got = o
		return nil, errCaptured
	})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	if err := cmd.Execute(); !errors.Is(err, errCaptured) {
		t.Fatalf("isolate run %v: %v", args, err)
	}
	got.Log, got.Metrics, got.Warn = nil, nil, nil
	if len(got.Labels) == 0 {
		got.Labels = nil // "labels: []" is no label, as the default
	}
	return got
}

// TestShippedIsolateConfig: the commented /etc/ctrperf/isolate.yaml the
// package installs changes nothing, and every value it shows, uncommented,
// is a known key holding the default it claims.
func TestShippedIsolateConfig(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "packaging", "isolate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	asShipped := filepath.Join(dir, "isolate.yaml")
	uncommented := filepath.Join(dir, "uncommented.yaml")
	key := regexp.MustCompile(`(?m)^#([a-z_]+: .*)$`)
	if n := len(key.FindAll(shipped, -1)); n < 15 {
		t.Fatalf("the shipped config shows %d options, want every one", n)
	}
	if err := os.WriteFile(asShipped, shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(uncommented, key.ReplaceAll(shipped, []byte("$1")), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := isolateOptionsFor(t)
	if !defaults.Params.IRQ || !defaults.Params.RPS {
		t.Fatalf("defaults %+v: irq and rps should be on", defaults)
	}
	for _, f := range []string{asShipped, uncommented} {
		if got := isolateOptionsFor(t, "--config", f); !reflect.DeepEqual(got, defaults) {
			t.Errorf("--config %s:\n got %+v\nwant %+v", filepath.Base(f), got, defaults)
		}
	}
}

// TestIsolateConfigMerge: what a file leaves out keeps the flag default
// (irq and rps stay on), what it names replaces it, a flag on the command
// line wins over the file.
func TestIsolateConfigMerge(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte("policy: strict\nhot_after: 5\nrps: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := isolateOptionsFor(t, "--config", f, "--hot-after", "3")
	if got.Params.Policy != isolate.PolicyStrict || got.Params.HotAfter != 3 || !got.Params.IRQ || got.Params.RPS {
		t.Errorf("got policy %s, hot_after %d, irq %v, rps %v; want strict, 3 (the flag), irq on (left out), rps off (the file)",
			got.Params.Policy, got.Params.HotAfter, got.Params.IRQ, got.Params.RPS)
	}
	if err := os.WriteFile(f, []byte("polcy: strict\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newIsolateRunCmd(func(context.Context, client.APIClient, isolate.Options) (controller, error) {
		t.Fatal("started with a misspelt config")
		return nil, nil
	})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--config", f})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "polcy") {
		t.Errorf("misspelt key: %v", err)
	}
}

// run executes the whole command tree with args and returns stdout, stderr.
func runRoot(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestPlansListAndShow(t *testing.T) {
	out, _, err := runRoot(t, "plans", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(plans.Names())+1 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("plans list:\n%s", out)
	}
	smoke := regexp.MustCompile(`(?m)^smoke\s+web\s+3\s+bare metal vs Docker`)
	if !smoke.MatchString(out) {
		t.Errorf("plans list lacks smoke's row (web, 3 configurations, its description):\n%s", out)
	}

	out, _, err = runRoot(t, "plans", "show", "smoke")
	want, _ := os.ReadFile(filepath.Join("..", "..", "plans", "smoke.yaml"))
	if err != nil || out != string(want) {
		t.Errorf("plans show smoke: %v; %d bytes, the file has %d", err, len(out), len(want))
	}
	_, _, err = runRoot(t, "plans", "show", "nope")
	if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "smoke") {
		t.Errorf("plans show nope: %v, want exit status 2 naming the plans there are", err)
	}
}

// TestBenchValidateBuiltinPlan: from a directory without plan files, a
// name finds the built-in plan and says so. A file of that name (a plan
// called shadow) does not change what the name means: only ./smoke reads
// it.
func TestBenchValidateBuiltinPlan(t *testing.T) {
	t.Chdir(t.TempDir())
	out, stderr, err := runRoot(t, "bench", "validate", "smoke", "--quick")
	if err != nil || !strings.Contains(stderr, "using the built-in plan smoke") || !strings.Contains(out, "docker-published") {
		t.Fatalf("bench validate smoke: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	shadow := "name: shadow\nworkload: web\nbaseline: only\nconfigurations:\n  - name: only\n    runtime: host\n"
	if err := os.WriteFile("smoke", []byte(shadow), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = runRoot(t, "bench", "validate", "smoke")
	if err != nil || !strings.Contains(stderr, "built-in plan smoke, not the file smoke here") || strings.Contains(out, "shadow") || !strings.Contains(out, "docker-published") {
		t.Fatalf("with a file named smoke: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	out, stderr, err = runRoot(t, "bench", "validate", "./smoke")
	if err != nil || !strings.Contains(stderr, "plan file ./smoke (not the built-in plan") || !strings.Contains(out, "shadow") {
		t.Fatalf("./smoke: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	a, _, err := runRoot(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runRoot(t, "version")
	if !strings.HasPrefix(a, "ctrperf ") || !strings.Contains(a, "go1.") || a != b {
		t.Errorf("--version %q and version %q should be the same line with the Go version", a, b)
	}
}

// complete asks cobra's completion for the words after `ctrperf`.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	out, _, err := runRoot(t, append([]string{"__complete"}, words...)...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, ":") { // the directive
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return got
}

func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("mine.yaml", []byte("name: mine\nworkload: web\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: b\n    runtime: docker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		words []string
		want  []string
	}{
		{[]string{"bench", "run", "noisy"}, []string{"noisy-neighbour", "noisy-neighbour-2hot"}},
		{[]string{"bench", "validate", "mi"}, []string{"mine.yaml"}},
		{[]string{"plans", "show", "sm"}, []string{"smoke"}},
		{[]string{"clean", "--hosts", "lab"}, []string{"lab-network", "lab-smoke"}},
		{[]string{"bench", "run", "smoke", "--only", ""}, []string{"bare-metal", "docker-published", "docker-container-ip"}},
		{[]string{"bench", "run", "smoke", "--only", "docker-published,docker-c"}, []string{"docker-published,docker-container-ip"}},
		{[]string{"bench", "validate", "mine.yaml", "--only", ""}, []string{"a", "b"}},
		{[]string{"isolate", "run", "--policy", ""}, []string{"shield", "paper", "strict"}},
		{[]string{"report", "out", "--format", ""}, []string{"table", "md", "json", "csv", "html", "summary"}},
		{[]string{"compare", "a", "b", "--format", ""}, []string{"table", "md", "json"}},
	}
	for _, tc := range tests {
		got := complete(t, tc.words...)
		var kept []string
		for _, g := range got { // plan names are filtered by the shell, not by us
			if strings.HasPrefix(g, tc.words[len(tc.words)-1]) || tc.words[len(tc.words)-1] == "" {
				kept = append(kept, g)
			}
		}
		if !reflect.DeepEqual(kept, tc.want) {
			t.Errorf("ctrperf %s<TAB>: %q, want %q", strings.Join(tc.words, " "), kept, tc.want)
		}
	}
}

func TestValuesFromUsage(t *testing.T) {
	tests := map[string][]string{
		"table, md or json":                     {"table", "md", "json"},
		"table, md, json, csv or html":          {"table", "md", "json", "csv", "html"},
		"text or json: how to print":            {"text", "json"},
		"output directory (default out/<plan>)": nil,
		"json":                                  nil,
	}
	for usage, want := range tests {
		if got := valuesFromUsage(usage); !reflect.DeepEqual(got, want) {
			t.Errorf("valuesFromUsage(%q) = %q, want %q", usage, got, want)
		}
	}
}
