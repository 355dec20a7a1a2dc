package kernel

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzProcParsers feeds the same bytes to every parser of a /proc file in
// this package. The kernel writes these files, but a container (or a
// fixture root) can show ctrperf files of any content: no parser may panic
// or loop, and what one accepts must be self-consistent. Seed corpus: the
// fixtures under testdata and testdata/fuzz/FuzzProcParsers.
func FuzzProcParsers(f *testing.F) {
	_ = filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
		return nil
	})
	f.Add([]byte("42 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"))
	f.Add([]byte("some avg10=nan avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=9223372036854775807\n"))
	f.Add([]byte("voluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if irqs, err := ParseInterrupts(bytes.NewReader(data)); err == nil {
			for _, i := range irqs {
				_, _ = i.Number()
				_ = i.Name()
			}
		}
		if mounts, err := ParseMountinfo(bytes.NewReader(data)); err == nil {
			for _, m := range mounts {
				_ = IsMountPoint(mounts, m.Point)
			}
		}
		if paths, err := ParseProcCgroup(bytes.NewReader(data)); err == nil {
			_, _ = CgroupPath(paths)
		}
		if psi, err := ParsePressure(bytes.NewReader(data)); err == nil {
			for _, l := range []Pressure{psi.Some, psi.Full} {
				for _, v := range []float64{l.Avg10, l.Avg60, l.Avg300} {
					if !(v >= 0 && v <= 100) {
						t.Fatalf("pressure parsed to %v from %q", v, data)
					}
				}
				if l.Total < 0 {
					t.Fatalf("pressure total parsed to %v from %q", l.Total, data)
				}
			}
		}
		_, _ = parseStatStartTime(bytes.NewReader(data))
		_ = parseStatAlive(data)
		_, _ = ParseStatusCtxSwitches(bytes.NewReader(data))
		_, _ = ParseCPUModel(bytes.NewReader(data))
		_, _ = ParseMemTotal(bytes.NewReader(data))
	})
}
