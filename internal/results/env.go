package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvFileName is the environment facts file of an output directory
// (written by bench; the report reads what concerns the results' validity).
const EnvFileName = "env.json"

// Concurrency is what OUT/env.json says about other `bench run` sessions
// that ran beside this one: a run started with --allow-concurrent shares
// the machine, and its numbers are disturbed by the other's.
type Concurrency struct {
	AllowConcurrent bool `json:"allow_concurrent"`
	// Beside are the live sessions found when an invocation started
	// (owner descriptions: pid, command, start, output).
	Beside []string `json:"beside,omitempty"`
}

// ReadConcurrency reads the concurrency section of dir/env.json; nil when
// the file or the section is missing.
func ReadConcurrency(dir string) (*Concurrency, error) {
	b, err := os.ReadFile(filepath.Join(dir, EnvFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Concurrency *Concurrency `json:"concurrency"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, EnvFileName), err)
	}
	return doc.Concurrency, nil
}
