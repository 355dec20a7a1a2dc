package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"ctrperf/internal/exitcode"
)

// execute runs ctrperf with args in this process and returns its exit
// status and what it printed, as main would.
func execute(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	root.SetArgs(args)
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	cmd, err := root.ExecuteC()
	code = exitStatus(cmd, err, &errb)
	return code, out.String(), errb.String()
}

// commandPaths lists every command of the tree (without the root's name),
// the hidden ones included, except cobra's completion-request commands,
// which parse no flags.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.DisableFlagParsing {
			continue
		}
		p := append(slices.Clone(prefix), sub.Name())
		out = append(out, p)
		out = append(out, commandPaths(sub, p)...)
	}
	return out
}

func TestUnknownFlagExitsTwoForEveryCommand(t *testing.T) {
	paths := append([][]string{{}}, commandPaths(newRootCmd(), nil)...)
	if len(paths) < 15 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(append([]string{"ctrperf"}, p...), " ")
		t.Run(name, func(t *testing.T) {
			code, _, stderr := execute(t, append(p, "--no-such-flag")...)
			if code != exitcode.Usage || !strings.Contains(stderr, "unknown flag: --no-such-flag") {
				t.Errorf("%s --no-such-flag: exit %d, stderr %q; want 2 naming the flag", name, code, stderr)
			}
		})
	}
}

func TestExitStatuses(t *testing.T) {
	state := t.TempDir()
	tests := []struct {
		args []string
		want int
		says string // in stderr
	}{
		// Usage: the command line is wrong.
		{[]string{"nosuch"}, 2, `unknown command "nosuch" for "ctrperf"`},
		{[]string{"benhc"}, 2, "did you mean bench?"},
		{[]string{"bench", "nosuch"}, 2, `unknown command "nosuch" for "ctrperf bench"`},
		{[]string{"isolate", "stat"}, 2, "did you mean status?"},
		{[]string{"report"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"help", "nosuch"}, 2, `unknown help topic "nosuch"`},
		{[]string{"help", "benhc"}, 2, "did you mean bench?"},
		{[]string{"help", "bench", "nosuch"}, 2, `unknown help topic "bench nosuch"`},
		{[]string{"compare", "a"}, 2, "accepts 2 arg(s), received 1"},
		{[]string{"bench", "validate"}, 2, "accepts 1 arg(s)"},
		{[]string{"load"}, 2, "accepts 1 arg(s)"},
		{[]string{"doctor", "extra"}, 2, `unknown command "extra"`},
		{[]string{"images", "list", "extra"}, 2, `unknown command "extra"`},
		{[]string{"load", "--rate", "fast", "http://127.0.0.1:1/"}, 2, `invalid argument "fast" for "--rate"`},
		{[]string{"report", "--format", "pdf", "out"}, 2, "want one of table, md, json, csv, html, summary"},
		{[]string{"doctor", "--format", "md"}, 2, "want one of table, json"},
		{[]string{"report", "--json", "--format", "md", "out"}, 2, "--json means --format json; it contradicts --format md"},
		{[]string{"report", "--format", "md", "--json", "out"}, 2, "--json means --format json; it contradicts --format md"},
		{[]string{"load", "http://127.0.0.1:1/"}, 2, "give a rate"},
		{[]string{"observe", "--interval", "0s"}, 2, "--interval must be positive"},
		{[]string{"observe", "--devices", "nosuchdev"}, 2, "no block device nosuchdev here (devices: "},
		{[]string{"bench", "run"}, 2, "needs a PLAN"},
		{[]string{"images", "build", "--for", "smoke", "ticketd"}, 2, "name images or give --for PLAN, not both"},
		{[]string{"images", "build", "--for", "nosuch"}, 2, `no built-in plan "nosuch"`},
		{[]string{"doctor", "--plan", "nosuch"}, 2, `no built-in plan "nosuch"`},
		// Failures: the command line is right, the work failed.
		{[]string{"report", "/nonexistent/out"}, 1, "/nonexistent/out"},
		{[]string{"compare", "/nonexistent/a", "/nonexistent/b"}, 1, "/nonexistent/a"},
		{[]string{"bench", "validate", "/nonexistent/plan.yaml"}, 1, "/nonexistent/plan.yaml"},
		{[]string{"isolate", "status", "--state-dir", state}, 1, "no controller is running"},
		{[]string{"load", "--concurrency", "1", "--duration", "1s", "http://127.0.0.1:1/"}, 1, "is unreachable"},
		// Success.
		{[]string{"bench", "validate", "../../plans/smoke.yaml", "--format", "json"}, 0, ""},
		{[]string{"bench", "validate", "../../plans/smoke.yaml", "--json", "--format", "json"}, 0, ""},
		{[]string{"bench"}, 0, ""}, // a group alone prints its help
		{[]string{"help", "bench", "run"}, 0, ""},
		{[]string{}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := execute(t, tt.args...)
			if code != tt.want || !strings.Contains(stderr, tt.says) {
				t.Errorf("ctrperf %s: exit %d, stderr:\n%s\nwant exit %d saying %q", strings.Join(tt.args, " "), code, stderr, tt.want, tt.says)
			}
			if code == exitcode.Usage && !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("a usage error without the hint to --help:\n%s", stderr)
			}
		})
	}
}

func TestHelpListsExitStatuses(t *testing.T) {
	code, out, _ := execute(t, "--help")
	if code != 0 {
		t.Fatalf("--help exits %d", code)
	}
	for _, want := range []string{"Exit status:", "2    usage", "3    a threshold was broken", "130  interrupted"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctrperf --help lacks %q:\n%s", want, out)
		}
	}
}

// resultCommands print results: each takes --format with table and json,
// completes its values, and keeps --json as the alias.
var resultCommands = [][]string{
	{"doctor"}, {"load"}, {"observe"}, {"images", "list"}, {"isolate", "status"},
	{"compare"}, {"report"}, {"bench", "validate"},
}

func TestEveryResultCommandTakesFormat(t *testing.T) {
	root := newRootCmd()
	for _, p := range resultCommands {
		cmd, _, err := root.Find(p)
		if err != nil || cmd.Name() != p[len(p)-1] {
			t.Fatalf("%v: %v", p, err)
		}
		name := cmd.CommandPath()
		f := cmd.Flags().Lookup("format")
		if f == nil || f.DefValue != formatTable {
			t.Errorf("%s: no --format defaulting to table", name)
			continue
		}
		if cmd.Flags().Lookup("json") == nil {
			t.Errorf("%s: no --json alias", name)
		}
		complete, ok := cmd.GetFlagCompletionFunc("format")
		if !ok {
			t.Errorf("%s: --format has no completion", name)
			continue
		}
		got, dir := complete(cmd, nil, "")
		var values []string
		for _, c := range got {
			values = append(values, strings.SplitN(c, "\t", 2)[0])
		}
		if !slices.Contains(values, formatTable) || !slices.Contains(values, formatJSON) || dir != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("%s: --format completes %v (directive %d), want table and json without files", name, values, dir)
		}
	}
}

func TestWithVersions(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":[2]}`, `{"schema_version":1,"ctrperf_version":"dev","a":1,"b":[2]}`},
		{`{}`, `{"schema_version":1,"ctrperf_version":"dev"}`},
		{"{\n  \"x\": {}\n}\n", `{"schema_version":1,"ctrperf_version":"dev","x": {}`},
		{`{"schema_version":7,"a":1}`, `{"schema_version":7,"a":1}`}, // already versioned: left alone
	} {
		got, err := withVersions([]byte(tc.in))
		if err != nil || !strings.HasPrefix(string(got), tc.want) {
			t.Errorf("withVersions(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := withVersions([]byte(`[1,2]`)); err == nil {
		t.Error("an array was accepted as an object")
	}
}
