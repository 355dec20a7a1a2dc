package plan

import (
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the plan decoder. It must never panic,
// and a plan it accepts must render to a canonical form that parses again
// into the same canonical form (what --resume relies on). The seed corpus
// is testdata/fuzz/FuzzParse (the shipped plans and this package's good and
// bad fixtures); a crasher found by `go test -fuzz` lands there too and
// stays a regression case.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opt := range []Options{{Schema: testSchema{}}, {Schema: testSchema{}, Quick: true}, {}} {
			p, err := Parse("fuzz.yaml", data, opt)
			if err != nil {
				continue
			}
			canon, err := p.Canonical()
			if err != nil {
				t.Fatalf("accepted plan does not render: %v", err)
			}
			again, err := Parse("canonical.yaml", canon, Options{Schema: opt.Schema})
			if err != nil {
				t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
			}
			canon2, err := again.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(canon, canon2) {
				t.Fatalf("canonical form is not stable:\n%s\n---\n%s", canon, canon2)
			}
		}
	})
}
