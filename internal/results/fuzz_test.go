package results

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadRepair: whatever a crash, a full disk or another program leaves
// in results.jsonl, reading it never panics, and the tail repair that a
// resume does loses no byte (what it cuts is kept in the .partial file) and
// leaves a file that reads without a truncated last line and ends on a line
// boundary, so the records appended next start on a line of their own.
// Seed corpus: the cases below and testdata/fuzz/FuzzReadRepair.
func FuzzReadRepair(f *testing.F) {
	rec := []byte(`{"plan":"p","run_id":"r1","index":0,"config":"a","repetition":0,"status":"ok"}`)
	f.Add(append(append([]byte{}, rec...), '\n'))
	f.Add(append(append(append([]byte{}, rec...), '\n'), rec[:20]...))
	f.Add(append(append([]byte{}, rec...), 0, 0, 0))
	f.Add([]byte("\n\n{\"plan\":\n"))
	f.Add([]byte("not json\n" + string(rec) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Read(bytes.NewReader(data))
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := RepairTail(dir)
		if err != nil {
			t.Fatalf("repair: %v", err)
		}
		kept, _ := os.ReadFile(path)
		var cut []byte
		if rep.Removed > 0 {
			p, err := os.ReadFile(rep.KeptIn)
			if err != nil {
				t.Fatalf("repair removed %d bytes but kept none: %v", rep.Removed, err)
			}
			cut = bytes.TrimSuffix(p, []byte("\n"))
		}
		if !bytes.Equal(append(append([]byte{}, kept...), cut...), data) || int64(len(cut)) != rep.Removed {
			t.Fatalf("repair lost bytes: %d kept + %d cut (reported %d) of %d", len(kept), len(cut), rep.Removed, len(data))
		}
		if len(kept) > 0 && kept[len(kept)-1] != '\n' {
			t.Fatalf("repaired file does not end on a line boundary: %q", kept)
		}
		if _, err := ReadDir(dir); errors.Is(err, ErrTruncated) {
			t.Fatalf("repaired file still has a truncated last line: %v", err)
		}
	})
}
