package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/results"
)

func TestRunObserveOnFixture(t *testing.T) {
	root := "../../internal/observe/testdata/host-v1/t0/"
	base := observeOptions{
		interval: 50 * time.Millisecond, duration: 260 * time.Millisecond,
		procRoot: root + "proc", sysRoot: root + "sys", cgroupRoot: root + "cgroup",
	}
	for _, tc := range []struct {
		desc  string
		json  bool
		check func(t *testing.T, out string)
	}{
		{"--json prints one sample per line", true, func(t *testing.T, out string) {
			sc := bufio.NewScanner(strings.NewReader(out))
			n := 0
			for sc.Scan() {
				var s results.Sample
				if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
					t.Fatalf("line %d is not a sample: %v: %s", n+1, err, sc.Text())
				}
				if _, ok := s.Disks["vda"]; !ok {
					t.Errorf("line %d has no vda: %s", n+1, sc.Text())
				}
				n++
			}
			if n == 0 {
				t.Error("no samples printed")
			}
		}},
		{"text prints iostat-like blocks and the summary", false, func(t *testing.T, out string) {
			for _, want := range []string{"%iowait", "Device", "vda", "Process group", "docker-proxy", "summary over"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := base
			o.json = tc.json
			var out, errOut bytes.Buffer
			if err := runObserve(context.Background(), &out, &errOut, o); err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.String())
		})
	}
	if err := runObserve(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, observeOptions{}); err == nil {
		t.Error("zero interval accepted")
	}
}
