package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileName is the raw results file inside an output directory.
const FileName = "results.jsonl"

// Store appends RunRecords to OUT/results.jsonl, one JSON object per line,
// synced to disk after every record so a killed run loses at most the run in
// progress.
type Store struct {
	mu sync.Mutex
	f  *os.File
}

// OpenStore opens (creating if needed) the results file in dir for appending.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory %s: %w", dir, err)
	}
	p := filepath.Join(dir, FileName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	return &Store{f: f}, nil
}

// Append writes one record and syncs it.
func (s *Store) Append(r *RunRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode run record %s: %w", r.RunID, err)
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(b); err != nil {
		return fmt.Errorf("append to %s: %w", s.f.Name(), err)
	}
	return s.f.Sync()
}

// Close closes the file.
func (s *Store) Close() error { return s.f.Close() }

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
