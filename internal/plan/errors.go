package plan

import (
	"fmt"
	"sort"
	"strings"
)

// FieldError is one problem in a plan file, located by file, line and the
// field's path inside the plan (e.g. "configurations[1].network").
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return loc + ": " + e.Msg
	}
	return loc + ": " + e.Field + ": " + e.Msg
}

// Errors is every problem found in a plan. Validation collects them all
// rather than stopping at the first, so one edit round fixes a whole file.
type Errors []*FieldError

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// sorted orders errors by line so the output reads top to bottom.
func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
	return es
}

// closest returns the candidate nearest to s by edit distance when it is
// near enough to be a plausible typo, else "".
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// A third of the word may be wrong; beyond that a suggestion misleads.
	limit := len(s)/3 + 1
	if bestD < 0 || bestD > limit || bestD >= len(s) {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// oneOf formats the accepted values of an enumerated knob.
func oneOf(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "one of " + strings.Join(q, ", ")
}
