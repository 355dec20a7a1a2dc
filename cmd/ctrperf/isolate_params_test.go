package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/bench"
	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
)

// paramSample is a valid value of an isolate.Params field other than its
// default, as the text a flag and a YAML file take.
func paramSample(t *testing.T, f reflect.StructField, def reflect.Value) (any, string) {
	t.Helper()
	switch {
	case f.Type == reflect.TypeFor[isolate.Policy]():
		p := isolate.Policies[len(isolate.Policies)-1]
		return p, string(p)
	case f.Type == reflect.TypeFor[isolate.DemoteCgroup]():
		return isolate.DemoteContainer, string(isolate.DemoteContainer)
	case f.Type == reflect.TypeFor[isolate.DemoteClass]():
		return isolate.DemoteWeight, string(isolate.DemoteWeight)
	case f.Type == reflect.TypeFor[time.Duration]():
		d := 2 * time.Duration(def.Int())
		return d, d.String()
	case f.Type.Kind() == reflect.Bool:
		return !def.Bool(), strconv.FormatBool(!def.Bool())
	case f.Type.Kind() == reflect.Int:
		return int(def.Int()) + 1, strconv.Itoa(int(def.Int()) + 1)
	case f.Type.Kind() == reflect.Float64:
		x := 0.8 * def.Float()
		return x, strconv.FormatFloat(x, 'g', -1, 64)
	case f.Type.Kind() == reflect.String:
		return "eth", "eth"
	}
	t.Fatalf("isolate.Params.%s: no sample value of type %s; add one here", f.Name, f.Type)
	return nil, ""
}

// paramInvalid is a value of the field that isolate.Params' range refuses
// ("" for a boolean, which has none).
func paramInvalid(f reflect.StructField) string {
	switch {
	case f.Type == reflect.TypeFor[isolate.Policy](), f.Type == reflect.TypeFor[isolate.DemoteCgroup](), f.Type == reflect.TypeFor[isolate.DemoteClass]():
		return "bogus"
	case f.Type == reflect.TypeFor[time.Duration]():
		return "0s"
	case f.Type.Kind() == reflect.Int, f.Type.Kind() == reflect.Float64:
		return "0"
	case f.Type.Kind() == reflect.String:
		return `"("`
	}
	return ""
}

// isolateRunErr runs `isolate run ARGS` and returns its error, which must
// come before the controller starts.
func isolateRunErr(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newIsolateRunCmd(func(context.Context, client.APIClient, isolate.Options) (controller, error) {
		return nil, errCaptured
	})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	return cmd.Execute()
}

const isolateParamsPlan = `name: p
workload: noisy
baseline: a
configurations:
  - name: a
    runtime: docker
    network: container-ip
    isolate:
      policy: shield
%s`

// planParams decodes a plan whose isolate knob adds the line extra (or
// replaces its policy).
func planParams(t *testing.T, extra string) (isolate.Params, error) {
	t.Helper()
	src := fmt.Sprintf(isolateParamsPlan, extra)
	if strings.HasPrefix(extra, "      policy:") {
		src = strings.Replace(src, "      policy: shield\n", "", 1) // extra names the policy
	}
	p, err := bench.ParsePlan("p.yaml", []byte(src), plan.Options{})
	if err != nil {
		return isolate.Params{}, err
	}
	c, _ := p.Config("a")
	return c.Isolate.Params.(isolate.Params), nil
}

// isolate.Params is the only place an isolate parameter, its default and
// its range live: for every field (found by reflection, so a new one is
// covered without touching this test) a plan's isolate: key, the flag of
// `isolate run` and its --config file decode the same value onto the same
// field, leave the same default when unset (a plan steers IRQs and RPS
// only when asked: the one difference, by design) and refuse the same
// out-of-range value, naming the key.
func TestIsolateParamsOneStructEverywhere(t *testing.T) {
	def := reflect.ValueOf(isolate.DefaultParams())
	typ := def.Type()
	dir := t.TempDir()
	shipped, err := os.ReadFile(filepath.Join("..", "..", "packaging", "isolate.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	fromPlan, err := planParams(t, "")
	if err != nil {
		t.Fatal(err)
	}
	fromPlan.IRQ, fromPlan.RPS = true, true
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for desc, got := range map[string]isolate.Params{
		"plan":        fromPlan,
		"flags":       isolateOptionsFor(t).Params,
		"config file": isolateOptionsFor(t, "--config", empty).Params,
	} {
		if !reflect.DeepEqual(got, isolate.DefaultParams()) {
			t.Errorf("%s: defaults\n got %+v\nwant %+v", desc, got, isolate.DefaultParams())
		}
	}

	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		flag := "--" + strings.ReplaceAll(key, "_", "-")
		t.Run(key, func(t *testing.T) {
			if f.Tag.Get("help") == "" {
				t.Errorf("isolate.Params.%s has no help tag (the flag's usage)", f.Name)
			}
			if !bytes.Contains(shipped, []byte("\n#"+key+": ")) {
				t.Errorf("packaging/isolate.yaml does not show #%s: with its default", key)
			}
			want, text := paramSample(t, f, def.Field(i))
			quoted := strconv.Quote(text)
			if f.Type.Kind() != reflect.String {
				quoted = text
			}
			cfg := filepath.Join(dir, key+".yaml")
			if err := os.WriteFile(cfg, []byte(key+": "+quoted+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			inPlan, err := planParams(t, fmt.Sprintf("      %s: %s\n", key, quoted))
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			for desc, got := range map[string]isolate.Params{
				"plan":        inPlan,
				"flag":        isolateOptionsFor(t, flag+"="+text).Params,
				"config file": isolateOptionsFor(t, "--config", cfg).Params,
			} {
				if v := reflect.ValueOf(got).Field(i).Interface(); !reflect.DeepEqual(v, want) {
					t.Errorf("%s: %s = %v, want %v", desc, key, v, want)
				}
			}

			bad := paramInvalid(f)
			if bad == "" {
				return // a boolean has no range
			}
			if err := os.WriteFile(cfg, []byte(key+": "+bad+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, planErr := planParams(t, fmt.Sprintf("      %s: %s\n", key, bad))
			unquoted, _ := strconv.Unquote(bad)
			if unquoted == "" {
				unquoted = bad
			}
			for desc, err := range map[string]error{
				"plan":        planErr,
				"flag":        isolateRunErr(t, flag+"="+unquoted),
				"config file": isolateRunErr(t, "--config", cfg),
			} {
				if err == nil || !strings.Contains(err.Error(), key) || err == errCaptured {
					t.Errorf("%s: %s: %s: error %v, want one naming %s", desc, key, bad, err, key)
				}
			}
		})
	}
}

// A plan's parameters reach a controller started elsewhere (the DaemonSet
// of a Kubernetes run) as flags: they must parse back to the same values.
func TestIsolateParamsFlagsRoundTrip(t *testing.T) {
	p := isolate.DefaultParams()
	p.Policy, p.HotAfter, p.CoolThreshold, p.Interval, p.IRQ, p.StallGate, p.DemoteOnly = isolate.PolicyStrict, 7, 0.25, 250*time.Millisecond, false, true, true
	p.Demote, p.IRQPattern = true, "eth[0-9]"
	got := isolateOptionsFor(t, p.Flags()...).Params
	if !reflect.DeepEqual(got, p) {
		t.Errorf("flags %v parse to\n%+v\nwant\n%+v", p.Flags(), got, p)
	}
}
