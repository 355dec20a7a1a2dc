package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// diskFile is a File on a disk that fails: it holds room more bytes (-1:
// unlimited) and then fails with ENOSPC after a partial write, as a full
// disk does; readOnly fails every write with EROFS.
type diskFile struct {
	data     []byte
	room     int
	readOnly bool
	syncErr  error
	truncErr error
	writes   int
}

func (f *diskFile) Write(b []byte) (int, error) {
	f.writes++
	if f.readOnly {
		return 0, &os.PathError{Op: "write", Path: "/fake", Err: syscall.EROFS}
	}
	if f.room >= 0 && len(b) > f.room {
		n := f.room
		f.data = append(f.data, b[:n]...)
		f.room = 0
		return n, &os.PathError{Op: "write", Path: "/fake", Err: syscall.ENOSPC}
	}
	if f.room >= 0 {
		f.room -= len(b)
	}
	f.data = append(f.data, b...)
	return len(b), nil
}

func (f *diskFile) Sync() error { return f.syncErr }

func (f *diskFile) Truncate(n int64) error {
	if f.truncErr != nil {
		return f.truncErr
	}
	f.data = f.data[:n]
	return nil
}

func (f *diskFile) Close() error { return nil }

func TestStoreAppendOnAFailingDisk(t *testing.T) {
	first := &RunRecord{Plan: "p", RunID: "p-1", Status: StatusOK}
	second := &RunRecord{Plan: "p", RunID: "p-2", Status: StatusOK, Error: strings.Repeat("x", 200)}
	b, _ := json.Marshal(first)
	firstLine := string(b) + "\n"
	tests := []struct {
		desc      string
		file      *diskFile
		wantErrno error  // nil: the second record is stored
		wantOp    string // the step the error names
		wantData  string // the file afterwards; "" means the first line only
		broken    bool   // later appends are refused without writing
	}{
		{desc: "room for both", file: &diskFile{room: -1}, wantData: "both"},
		{desc: "disk full before the record: nothing of it is written", file: &diskFile{room: 0},
			wantErrno: syscall.ENOSPC, wantOp: "append"},
		{desc: "disk full mid-record: the partial line is cut back", file: &diskFile{room: 17},
			wantErrno: syscall.ENOSPC, wantOp: "append"},
		{desc: "read-only file system", file: &diskFile{room: -1, readOnly: true},
			wantErrno: syscall.EROFS, wantOp: "append"},
		{desc: "fsync fails with EIO: the record is not stored", file: &diskFile{room: -1, syncErr: syscall.EIO},
			wantErrno: syscall.EIO, wantOp: "sync"},
		{desc: "disk full and the cut fails too: the store refuses to write after the half line",
			file:      &diskFile{room: 17, truncErr: syscall.EROFS},
			wantErrno: syscall.ENOSPC, wantOp: "append", wantData: "partial", broken: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			// The first record fits; the disk's trouble starts after it.
			f := tt.file
			room, ro, syncErr := f.room, f.readOnly, f.syncErr
			f.room, f.readOnly, f.syncErr = -1, false, nil
			s := NewStore(f, "/out/results.jsonl", 0)
			if err := s.Append(first); err != nil {
				t.Fatal(err)
			}
			f.room, f.readOnly, f.syncErr = room, ro, syncErr

			err := s.Append(second)
			if tt.wantErrno == nil {
				if err != nil {
					t.Fatalf("Append = %v", err)
				}
				if n := bytes.Count(f.data, []byte("\n")); n != 2 {
					t.Errorf("%d lines, want 2: %q", n, f.data)
				}
				return
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != "/out/results.jsonl" || pe.Op != tt.wantOp || !errors.Is(err, tt.wantErrno) {
				t.Fatalf("Append = %#v (%v), want a PathError %s /out/results.jsonl with %v", err, err, tt.wantOp, tt.wantErrno)
			}
			switch tt.wantData {
			case "":
				if string(f.data) != firstLine {
					t.Errorf("file = %q, want the first line only", f.data)
				}
			case "partial":
				if !strings.HasPrefix(string(f.data), firstLine) || len(f.data) != len(firstLine)+17 {
					t.Errorf("file = %q, want the first line and 17 bytes", f.data)
				}
			}
			writes := f.writes
			f.room, f.readOnly, f.syncErr = -1, false, nil
			err = s.Append(first)
			if tt.broken {
				if err == nil || f.writes != writes || !errors.Is(err, tt.wantErrno) || !strings.Contains(err.Error(), "resumed") {
					t.Errorf("append after an unrepaired failure = %v (%d writes), want it refused without writing", err, f.writes-writes)
				}
				return
			}
			if err != nil || string(f.data) != firstLine+firstLine {
				t.Errorf("append once the disk recovered = %v, file %q", err, f.data)
			}
		})
	}
}

func TestStoreOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Append(&RunRecord{Plan: "p", Index: i}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// Reopened, it appends after what is there.
	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(&RunRecord{Plan: "p", Index: 3}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	recs, err := ReadDir(dir)
	if err != nil || len(recs) != 4 || recs[3].Index != 3 {
		t.Fatalf("ReadDir = %d records, %v", len(recs), err)
	}
}

func TestRepairTail(t *testing.T) {
	const a, b = `{"plan":"a"}` + "\n", `{"plan":"b"}` + "\n"
	tests := []struct {
		desc, in    string
		earlier     string // already in results.jsonl.partial
		want        string // results.jsonl afterwards
		wantPartial string // results.jsonl.partial afterwards
	}{
		{desc: "complete lines stay", in: a + b, want: a + b},
		{desc: "a cut last line goes and is kept", in: a + `{"plan":"b","ind`, want: a, wantPartial: `{"plan":"b","ind` + "\n"},
		{desc: "a single cut line goes", in: `{"pl`, want: "", wantPartial: `{"pl` + "\n"},
		{desc: "NUL bytes a crash left at the end go", in: a + "\x00\x00\x00\x00", want: a, wantPartial: "\x00\x00\x00\x00\n"},
		{desc: "a last line that is not a record goes, newline and all", in: a + "garbage}\n", want: a, wantPartial: "garbage}\n\n"},
		{desc: "a record without its newline goes too: the run is redone", in: a + `{"plan":"b"}`, want: a, wantPartial: `{"plan":"b"}` + "\n"},
		{desc: "trailing empty lines are no damage", in: a + "\n\n", want: a + "\n\n"},
		{desc: "an earlier repair's bytes are kept", in: a + `{"x`, earlier: "old\n", want: a, wantPartial: "old\n" + `{"x` + "\n"},
		{desc: "empty file", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, FileName)
			if err := os.WriteFile(p, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.earlier != "" {
				if err := os.WriteFile(p+PartialSuffix, []byte(tt.earlier), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := RepairTail(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if string(got) != tt.want {
				t.Errorf("results.jsonl = %q, want %q", got, tt.want)
			}
			kept, _ := os.ReadFile(p + PartialSuffix)
			if string(kept) != tt.wantPartial {
				t.Errorf("results.jsonl.partial = %q, want %q", kept, tt.wantPartial)
			}
			wantRemoved := int64(len(tt.in) - len(tt.want))
			if rep.Removed != wantRemoved || (wantRemoved > 0) != (rep.KeptIn == p+PartialSuffix) {
				t.Errorf("repair = %+v, want %d bytes removed", rep, wantRemoved)
			}
			if _, err := Read(bytes.NewReader(got)); err != nil {
				t.Errorf("repaired file does not read: %v", err)
			}
		})
	}
	if rep, err := RepairTail(t.TempDir()); err != nil || rep.Removed != 0 {
		t.Errorf("missing file: %+v, %v", rep, err)
	}
}

func TestReadSkipsABrokenLastLine(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		n       int
		wantErr error // nil: no error
	}{
		{"whole", `{"plan":"a"}` + "\n", 1, nil},
		{"cut last line", `{"plan":"a"}` + "\n" + `{"pla`, 1, ErrTruncated},
		{"NUL tail", `{"plan":"a"}` + "\n\x00\x00", 1, ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			recs, err := Read(strings.NewReader(tt.in))
			if len(recs) != tt.n || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Read = %d records, %v; want %d, %v", len(recs), err, tt.n, tt.wantErr)
			}
		})
	}
	if _, err := Read(strings.NewReader("{bad\n" + `{"plan":"a"}` + "\n")); err == nil || errors.Is(err, ErrTruncated) {
		t.Errorf("a broken line in the middle = %v, want an error that is not ErrTruncated", err)
	}
}
