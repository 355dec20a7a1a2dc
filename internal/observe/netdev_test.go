package observe

import (
	"os"
	"path/filepath"
	"testing"

	"ctrperf/internal/results"
)

func TestNetSamplerRates(t *testing.T) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(rx, tx string) {
		t.Helper()
		body := "h\nh\n  eth0: " + rx + " 10 0 0 0 0 0 0 " + tx + " 20 0 0 0 0 0 0\n"
		if err := os.WriteFile(filepath.Join(proc, "net", "dev"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := newNetSampler(proc)
	write("1000", "5000")
	var first results.Sample
	if err := n.sample(0, &first, nil); err != nil || first.Net != nil {
		t.Fatalf("priming reading gave %+v, %v", first.Net, err)
	}
	write("3000", "6000")
	var s results.Sample
	if err := n.sample(2, &s, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Net["eth0"]; got.RxBytesPerS != 1000 || got.TxBytesPerS != 500 || got.RxPacketsPerS != 0 {
		t.Errorf("eth0 = %+v", got)
	}
}
