package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"ctrperf/internal/fsutil"
)

// FileName is the raw results file inside an output directory.
const FileName = "results.jsonl"

// Store appends RunRecords to OUT/results.jsonl, one JSON object per line,
// synced to disk after every record so a killed run loses at most the run in
// progress.
//
// A record goes to the file in one write call (an O_APPEND write, so it is
// never interleaved with another), then fsync. When either fails — the disk
// is full, read-only, or failing — the file is cut back to its size before
// the record, so that no half line stays behind; if even that fails, the
// store refuses further records, which would follow the half line, and
// RepairTail removes it before the next append.
type Store struct {
	mu     sync.Mutex
	f      File
	path   string
	size   int64 // bytes known to be complete lines
	broken error // set when a failed append could not be cut back
}

// File is what a Store appends to: an *os.File opened with O_APPEND, or in
// tests a file that fails like a full or read-only disk.
type File interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

var _ File = (*os.File)(nil)

// OpenStore opens (creating if needed) the results file in dir for appending.
// dir and the file must be safe for root to write (fsutil.MakeDir,
// OpenTrusted): no symbolic link is followed. Errors are *os.PathError or
// *fsutil.UnsafePathError naming the path.
func OpenStore(dir string) (*Store, error) {
	if err := fsutil.MakeDir(dir); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, FileName)
	f, err := fsutil.OpenTrusted(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return NewStore(f, p, st.Size()), nil
}

// NewStore appends to f, the file at path that holds size bytes of
// complete lines.
func NewStore(f File, path string, size int64) *Store {
	return &Store{f: f, path: path, size: size}
}

// Path is the file the store appends to.
func (s *Store) Path() string { return s.path }

// Append writes one record and syncs it. An error is an *os.PathError
// naming the file, the step (append, sync) and the errno; the record is
// then not stored (or, if the file could not be cut back, the store is
// broken and says so on every later Append).
func (s *Store) Append(r *RunRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode run record %s: %w", r.RunID, err)
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	n, err := s.f.Write(b)
	op := "append"
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		op, err = "sync", s.f.Sync()
	}
	if err == nil {
		s.size += int64(n)
		return nil
	}
	fail := &os.PathError{Op: op, Path: s.path, Err: errnoOf(err)}
	// Whatever reached the file of this record goes: the run is not
	// recorded, and a resumed plan redoes it.
	if terr := s.f.Truncate(s.size); terr != nil {
		s.broken = &os.PathError{Op: op, Path: s.path, Err: fmt.Errorf("%w; cutting the partial record failed too (%v): it is removed when the plan is resumed", fail.Err, errnoOf(terr))}
		return s.broken
	}
	_ = s.f.Sync()
	return fail
}

// Close closes the file.
func (s *Store) Close() error { return s.f.Close() }

// errnoOf drops an *os.PathError's own path: the store names its file.
func errnoOf(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// PartialSuffix names the file, next to results.jsonl, that keeps the bytes
// RepairTail cut off.
const PartialSuffix = ".partial"

// Repair is what RepairTail did: how many bytes of a partial last line it
// removed and where it kept them. Zero when the file was whole.
type Repair struct {
	Removed int64
	KeptIn  string
}

// RepairTail makes OUT/results.jsonl end with a complete record again, so
// that the records appended next start on a line of their own: a last line
// without its newline, and every line after the last record that is not
// one (a crash mid-write can leave a cut line or a run of NUL bytes with
// newlines in it), are cut off. The removed bytes are
// first appended, synced, to results.jsonl.partial; nothing is lost. A
// missing file needs no repair.
func RepairTail(dir string) (Repair, error) {
	path := filepath.Join(dir, FileName)
	f, err := fsutil.OpenTrusted(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Repair{}, nil
	}
	if err != nil {
		return Repair{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Repair{}, err
	}
	size := st.Size()
	// The bytes after the last newline are a line never finished. Before
	// them, walk back over complete lines: blank ones (Read skips them)
	// and ones that are not a record (a crash can leave several, e.g. a
	// run of NULs with a newline in it) until the last record; everything
	// after that record is cut.
	cut, err := lineStart(f, size)
	if err != nil {
		return Repair{}, &os.PathError{Op: "read", Path: path, Err: errnoOf(err)}
	}
	for pos := cut; pos > 0; {
		start, err := lineStart(f, pos-1)
		if err != nil {
			return Repair{}, &os.PathError{Op: "read", Path: path, Err: errnoOf(err)}
		}
		line := make([]byte, pos-1-start)
		if _, err := f.ReadAt(line, start); err != nil && err != io.EOF {
			return Repair{}, &os.PathError{Op: "read", Path: path, Err: errnoOf(err)}
		}
		var rec RunRecord
		switch {
		case len(line) == 0:
		case json.Unmarshal(line, &rec) == nil:
			pos = 0
			continue
		default:
			cut = start
		}
		pos = start
	}
	if cut == size {
		return Repair{}, nil
	}
	partial := make([]byte, size-cut, size-cut+1)
	if _, err := f.ReadAt(partial, cut); err != nil && err != io.EOF {
		return Repair{}, &os.PathError{Op: "read", Path: path, Err: errnoOf(err)}
	}
	keep := path + PartialSuffix
	if err := appendSynced(keep, append(partial, '\n')); err != nil {
		return Repair{}, err
	}
	if err := f.Truncate(cut); err != nil {
		return Repair{}, &os.PathError{Op: "truncate", Path: path, Err: errnoOf(err)}
	}
	if err := f.Sync(); err != nil {
		return Repair{}, &os.PathError{Op: "sync", Path: path, Err: errnoOf(err)}
	}
	return Repair{Removed: size - cut, KeptIn: keep}, nil
}

// lineStart is the offset just after the last newline before end (0 when
// there is none), read backwards in chunks.
func lineStart(f io.ReaderAt, end int64) (int64, error) {
	const chunk = 64 << 10
	for end > 0 {
		start := max(end-chunk, 0)
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func appendSynced(path string, b []byte) error {
	f, err := fsutil.OpenTrusted(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadDir reads OUT/results.jsonl.
func ReadDir(dir string) ([]RunRecord, error) {
	p := filepath.Join(dir, FileName)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
	defer f.Close()
	recs, err := Read(f)
	if err != nil {
		return recs, fmt.Errorf("%s: %w", p, err)
	}
	return recs, nil
}

// ErrTruncated reports a last line cut short (a run killed while writing);
// the records before it are returned.
var ErrTruncated = errors.New("last line is truncated")

// Read parses JSON lines. A malformed final line (a write cut short by a
// kill) is dropped with ErrTruncated; a malformed line elsewhere is an error.
func Read(r io.Reader) ([]RunRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var out []RunRecord
	var pendingErr error
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if pendingErr != nil {
			return out, pendingErr
		}
		var rec RunRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			pendingErr = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if pendingErr != nil {
		return out, fmt.Errorf("%w: %v", ErrTruncated, pendingErr)
	}
	return out, nil
}
