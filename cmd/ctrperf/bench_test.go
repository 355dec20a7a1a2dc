package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/owner"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// cliWorkload lets plans validate in CLI tests without a real workload.
type cliWorkload struct{}

func (cliWorkload) Name() string                                       { return "clitest" }
func (cliWorkload) Decode(workload.Knobs) (any, any, error)            { return nil, nil, nil }
func (cliWorkload) Services(workload.Config) ([]engine.Service, error) { return nil, nil }
func (cliWorkload) Drive(context.Context, workload.Env) (*results.Measurement, error) {
	return nil, errors.New("not driven")
}

func init() { workload.Register(cliWorkload{}) }

func TestBenchCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("name: g\nworkload: clitest\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n  - name: ctr\n    runtime: docker\nquick:\n  repetitions: 1\n"), 0o644)
	os.WriteFile(bad, []byte("name: b\nworkload: clitest\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n    network: container-ip\n    foo: 1\n"), 0o644)
	tests := []struct {
		desc       string
		args       []string
		code       int // 0: success
		wantOut    string
		wantErr    string
		wantErrMsg string
	}{
		{"validate prints configurations and run order", []string{"bench", "validate", good}, 0, "round 3:", "", ""},
		{"validate --quick", []string{"bench", "validate", "--quick", good}, 0, "(quick variant)", "", ""},
		{"validate lists every problem and fails", []string{"bench", "validate", bad}, 1, "",
			bad + ":7: configurations[0] (a).network", "the plan has 2 problems"},
		{"run needs a plan", []string{"bench", "run"}, 2, "", "", "needs a PLAN file"},
		{"resume without a plan refuses --quick", []string{"bench", "run", "--resume", dir, "--quick"}, 2, "", "", "already has them applied"},
		{"run refuses a bad plan before anything starts", []string{"bench", "run", "--out", filepath.Join(dir, "out"), bad}, 1, "", "unknown key", "nothing was run"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var out, errb bytes.Buffer
			root := newRootCmd()
			root.SetArgs(tt.args)
			root.SetOut(&out)
			root.SetErr(&errb)
			err := root.Execute()
			code := exitcode.Of(err)
			if code != tt.code {
				t.Fatalf("exit %d (%v), want %d\nstdout: %s\nstderr: %s", code, err, tt.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, out.String())
			}
			if !strings.Contains(errb.String(), strings.Replace(tt.wantErr, "(a)", "(bare)", 1)) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, errb.String())
			}
			if tt.wantErrMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrMsg)) {
				t.Errorf("error %v lacks %q", err, tt.wantErrMsg)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a refused plan created its output directory (%v)", err)
	}
}

// TestBenchRunRefusesBesideALiveRun: a second bench run on the machine
// exits 1 naming the live one, before it creates anything.
func TestBenchRunRefusesBesideALiveRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("name: g\nworkload: clitest\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n"), 0o644)
	owners := owner.Dir{Path: filepath.Join(dir, "owners")}
	first, err := owners.Acquire(owner.Record{Kind: owner.KindBench, Session: "g-123456", Out: "out/first"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"--owners-dir", owners.Path, "bench", "run", "--quiet", "--out", filepath.Join(dir, "out"), good})
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.Execute()
	if exitcode.Of(err) != exitcode.Failure {
		t.Fatalf("exit %d (%v), want 1", exitcode.Of(err), err)
	}
	for _, want := range []string{"another bench run is running", "pid " + strconv.Itoa(os.Getpid()), "output out/first", "--allow-concurrent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", results.FileName)); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote results (%v)", err)
	}
}
