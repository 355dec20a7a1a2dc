package testenv

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records whether the helper skipped or
// failed; like the real one it then ends the goroutine, so run it in one of
// its own (see call).
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs f in a goroutine of its own and waits for it to end.
func call(f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
}

func TestSkipOrFail(t *testing.T) {
	tests := []struct {
		desc              string
		docker, root      string // CTRPERF_REQUIRE_DOCKER, CTRPERF_REQUIRE_ROOT
		rootTest          bool   // SkipOrFailRoot instead of SkipOrFail
		wantSkip, wantErr bool
	}{
		{"nothing required: a Docker test skips", "", "", false, true, false},
		{"CI: a Docker test fails", "1", "", false, false, true},
		{"only root required: a Docker test still skips", "", "1", false, true, false},
		{"nothing required: a root test skips", "", "", true, true, false},
		{"CI: a root test fails", "1", "", true, false, true},
		{"root required: a root test fails", "", "1", true, false, true},
		{"a value other than 1 requires nothing", "yes", "0", true, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv(RequireDockerEnv, tc.docker)
			t.Setenv(RequireRootEnv, tc.root)
			r := &recorder{TB: t}
			call(func() {
				if tc.rootTest {
					SkipOrFailRoot(r, "needs %s", "it")
				} else {
					SkipOrFail(r, "needs %s", "it")
				}
			})
			if r.skipped != tc.wantSkip || r.failed != tc.wantErr || r.msg != "needs it" {
				t.Errorf("skipped %v, failed %v, message %q; want skipped %v, failed %v", r.skipped, r.failed, r.msg, tc.wantSkip, tc.wantErr)
			}
		})
	}
}
