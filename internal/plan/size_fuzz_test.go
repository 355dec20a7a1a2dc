package plan

import "testing"

// FuzzParseMemory: a size that parses is a byte count a kernel file or the
// Docker API can take (not negative, no float-to-int overflow), and its
// rendering parses again to within the rounding of FormatMemory.
func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"512m", "1.5g", "64MiB", "1048576", "0", "1e30p", "9223372036854775807", "8e18", "9223000000000000000", "8EiB", "8.1EiB", "nan", "inf", "-1", "1kb", ".5", "1..2g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMemory(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseMemory(%q) = %d", s, v)
		}
		back, err := ParseMemory(FormatMemory(v))
		if err != nil {
			t.Fatalf("FormatMemory(%d) = %q does not parse: %v", v, FormatMemory(v), err)
		}
		if d := float64(back) - float64(v); d > float64(v)/500+1 || -d > float64(v)/500+1 {
			t.Fatalf("%q: %d rendered %q parses to %d", s, v, FormatMemory(v), back)
		}
	})
}
