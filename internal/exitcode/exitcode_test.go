package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

// thresholdLike is how another package returns a broken threshold without
// importing this one's types: any error with ExitCode() int.
type thresholdLike struct{}

func (thresholdLike) Error() string { return "p99 above bound" }
func (thresholdLike) ExitCode() int { return Threshold }

func TestOf(t *testing.T) {
	tests := []struct {
		desc string
		err  error
		want int
	}{
		{"nil is success", nil, OK},
		{"a plain error is a failure", errors.New("boom"), Failure},
		{"usage", Usagef("unknown flag --x"), Usage},
		{"usage wrapped further", fmt.Errorf("bench run: %w", Usagef("bad")), Usage},
		{"threshold", Thresholdf("p99 %d ms > %d ms", 12, 10), Threshold},
		{"a foreign type implementing ExitCode", fmt.Errorf("compare: %w", thresholdLike{}), Threshold},
		{"interrupted", &Error{Code: Interrupted}, Interrupted},
		{"the outermost coder wins", &UsageError{Err: &ThresholdError{Err: errors.New("x")}}, Usage},
	}
	for _, tt := range tests {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("%s: Of(%v) = %d, want %d", tt.desc, tt.err, got, tt.want)
		}
	}
}

func TestAsUsage(t *testing.T) {
	if AsUsage(nil) != nil {
		t.Error("AsUsage(nil) is not nil")
	}
	u := Usagef("x")
	if AsUsage(u) != u {
		t.Error("a usage error is wrapped twice")
	}
	base := errors.New("accepts 1 arg(s), received 0")
	got := AsUsage(base)
	if Of(got) != Usage || !errors.Is(got, base) || got.Error() != base.Error() {
		t.Errorf("AsUsage(%v) = %v (exit %d)", base, got, Of(got))
	}
}
