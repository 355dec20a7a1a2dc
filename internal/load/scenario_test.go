package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseScenario(t *testing.T) {
	tests := []struct {
		desc    string
		file    string
		yaml    string
		wantErr string
		labels  []string
	}{
		{desc: "the ticketd example parses with four steps", file: "testdata/ticketd-scenario.yaml",
			labels: []string{"login page", "login", "project page", "new ticket"}},
		{desc: "a reference to a variable no earlier step extracts is rejected", file: "testdata/bad-missing-var.yaml",
			wantErr: "{{token}}"},
		{desc: "unknown keys are rejected (typo of expect)", file: "testdata/bad-unknown-key.yaml",
			wantErr: "expected"},
		{desc: "no steps", yaml: "name: x\n", wantErr: "no steps"},
		{desc: "duplicate labels", yaml: "steps: [{label: a, path: /}, {label: a, path: /b}]", wantErr: "label used twice"},
		{desc: "missing label", yaml: "steps: [{path: /}]", wantErr: "label is required"},
		{desc: "unknown method", yaml: "steps: [{label: a, path: /, method: FETCH}]", wantErr: "unknown method"},
		{desc: "relative path", yaml: "steps: [{label: a, path: x}]", wantErr: "must start with /"},
		{desc: "form and body together", yaml: "steps: [{label: a, path: /, body: x, form: {a: b}}]", wantErr: "either form or body"},
		{desc: "regexp without a group", yaml: "steps: [{label: a, path: /, extract: {v: 'abc'}}]", wantErr: "exactly one group"},
		{desc: "regexp that does not compile", yaml: "steps: [{label: a, path: /, extract: {v: '(a'}}]", wantErr: "extract v"},
		{desc: "a variable used in the step that extracts it is not yet defined",
			yaml: "steps: [{label: a, path: '/{{v}}', extract: {v: '(a)'}}]", wantErr: "{{v}}"},
		{desc: "built-ins need no extraction", yaml: "steps: [{label: a, path: '/u/{{vu}}/{{session}}?r={{rand}}'}]", labels: []string{"a"}},
		{desc: "expect outside HTTP statuses", yaml: "steps: [{label: a, path: /, expect: 42}]", wantErr: "not an HTTP status"},
		{desc: "think time parses as a duration", yaml: "steps: [{label: a, path: /, think: 250ms}]", labels: []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.yaml)
			if tc.file != "" {
				f, err := os.Open(tc.file)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				r = f
			}
			sc, err := ParseScenario(r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(sc.Labels(), "|"); got != strings.Join(tc.labels, "|") {
				t.Errorf("labels = %s, want %s", got, strings.Join(tc.labels, "|"))
			}
		})
	}
}

func TestScenarioDefaults(t *testing.T) {
	sc, err := ParseScenario(strings.NewReader("steps: [{label: a, path: /, think: 250ms}, {label: b, method: post, path: /}]"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Steps[0].Method != "GET" || sc.Steps[1].Method != "POST" {
		t.Errorf("methods = %s, %s; want GET (default) and POST (upper-cased)", sc.Steps[0].Method, sc.Steps[1].Method)
	}
	if sc.Steps[0].Think != 250*time.Millisecond {
		t.Errorf("think = %v, want 250ms", sc.Steps[0].Think)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"csrf": "tok", "vu": "7"}
	tests := []struct{ desc, in, want string }{
		{"no references", "/plain", "/plain"},
		{"one reference", "/u/{{vu}}", "/u/7"},
		{"spaces inside braces", "{{ csrf }}&{{vu}}", "tok&7"},
		{"unset variable expands to nothing", "x{{gone}}y", "xy"},
	}
	for _, tc := range tests {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("%s: expand(%q) = %q, want %q", tc.desc, tc.in, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		desc string
		err  error
		want string
	}{
		{"nil is success", nil, ""},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, KindRefused},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), KindReset},
		{"broken pipe is a reset", fmt.Errorf("write: %w", syscall.EPIPE), KindReset},
		{"deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), KindTimeout},
		{"dial context deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), KindTimeout},
		{"server closed mid-response", io.ErrUnexpectedEOF, KindEOF},
		{"server closed before answering", io.EOF, KindEOF},
		{"our own cancellation is not the server's fault", fmt.Errorf("x: %w", context.Canceled), kindCanceled},
		{"protocol errors keep their kind", &protocolError{kind: KindServer, msg: "SERVER_ERROR out of memory"}, KindServer},
		{"anything else", errors.New("weird"), KindOther},
	}
	for _, tc := range tests {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify(%v) = %q, want %q", tc.desc, tc.err, got, tc.want)
		}
	}
}

func TestStatusKind(t *testing.T) {
	tests := []struct {
		desc           string
		status, expect int
		want           string
	}{
		{"200 without expectation", 200, 0, ""},
		{"302 without expectation is fine", 302, 0, ""},
		{"404 without expectation", 404, 0, KindHTTP4xx},
		{"503", 503, 0, KindHTTP5xx},
		{"expected 302 got 302", 302, 302, ""},
		{"expected 302 got 200", 200, 302, KindStatus},
		{"expected 404 got 404 is success", 404, 404, ""},
		{"expected 201 got 500", 500, 201, KindHTTP5xx},
	}
	for _, tc := range tests {
		if got := statusKind(tc.status, tc.expect); got != tc.want {
			t.Errorf("%s: statusKind(%d, %d) = %q, want %q", tc.desc, tc.status, tc.expect, got, tc.want)
		}
	}
}

func TestArrivals(t *testing.T) {
	t.Run("fixed rate is exactly i/rate", func(t *testing.T) {
		a := newArrivals(4, false, 0)
		for i, want := range []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second} {
			if got := a.next(); got != want {
				t.Errorf("arrival %d at %v, want %v", i, got, want)
			}
		}
	})
	t.Run("poisson is reproducible from its seed and has the asked mean rate", func(t *testing.T) {
		a, b := newArrivals(100, true, 42), newArrivals(100, true, 42)
		var last time.Duration
		n := 0
		for ; ; n++ {
			x, y := a.next(), b.next()
			if x != y {
				t.Fatalf("arrival %d differs between equal seeds: %v vs %v", n, x, y)
			}
			if x < last {
				t.Fatalf("arrival %d goes back in time", n)
			}
			last = x
			if x >= 100*time.Second {
				break
			}
		}
		// 100/s over 100 s: 10000 expected, sd 100; 5 sd is far beyond any seed's luck.
		if n < 9500 || n > 10500 {
			t.Errorf("%d arrivals in 100 s at 100/s", n)
		}
		c := newArrivals(100, true, 43)
		c.next()
		a2 := newArrivals(100, true, 42)
		a2.next()
		if c.next() == a2.next() {
			t.Error("different seeds gave the same second arrival")
		}
	})
}

func TestProfileValidate(t *testing.T) {
	tests := []struct {
		desc    string
		p       Profile
		wantErr string
	}{
		{"open loop", Profile{Rate: 10, Duration: time.Second}, ""},
		{"closed loop with op count and no duration", Profile{Concurrency: 4, Ops: 100}, ""},
		{"neither rate nor concurrency", Profile{Duration: time.Second}, "give a rate"},
		{"both", Profile{Rate: 1, Concurrency: 1, Duration: time.Second}, "not both"},
		{"negative rate", Profile{Rate: -1, Duration: time.Second}, "want between 0.001 and 1e+07"},
		{"NaN rate", Profile{Rate: math.NaN(), Duration: time.Second}, "want a finite number"},
		{"infinite rate", Profile{Rate: math.Inf(1), Duration: time.Second}, "want a finite number"},
		{"a rate below the floor (one arrival per 3000 years)", Profile{Rate: 1e-11, Duration: time.Second}, "want between 0.001"},
		{"the floor", Profile{Rate: MinRate, Duration: time.Second}, ""},
		{"the ceiling", Profile{Rate: MaxRate, Duration: time.Second}, ""},
		{"above the ceiling", Profile{Rate: 2e7, Duration: time.Second}, "want between"},
		{"op count in open loop", Profile{Rate: 1, Ops: 5, Duration: time.Second}, "closed loop only"},
		{"no duration", Profile{Concurrency: 1}, "duration"},
		{"negative warm-up", Profile{Concurrency: 1, Duration: time.Second, Warmup: -1}, "warm-up"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Validate() = %v, want error containing %q", tc.desc, err, tc.wantErr)
		}
	}
}
