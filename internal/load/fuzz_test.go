package load

import (
	"bytes"
	"testing"
)

// FuzzParseScenario feeds arbitrary bytes to the scenario decoder: it must
// never panic, and a scenario it accepts validates again unchanged (Validate
// only fills defaults once). Seed corpus: testdata/fuzz/FuzzParseScenario.
func FuzzParseScenario(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("accepted scenario fails a second Validate: %v", err)
		}
	})
}
