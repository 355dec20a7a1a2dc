package isolate

import (
	"bytes"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzIsolateConfig feeds arbitrary bytes to the `isolate run --config`
// decoder: it must never panic, and what it accepts must come back the same
// after being written as YAML and decoded again. Seed corpus:
// testdata/fuzz/FuzzIsolateConfig.
func FuzzIsolateConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := DecodeRunConfig(data, RunConfig{})
		if err != nil {
			return
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatalf("accepted options do not render: %v", err)
		}
		again, err := DecodeRunConfig(b, RunConfig{})
		if err != nil {
			t.Fatalf("rendered options do not decode: %v\n%s", err, b)
		}
		b2, err := yaml.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("options changed in a round trip:\n%s\n---\n%s", b, b2)
		}
	})
}
