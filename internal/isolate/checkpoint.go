package isolate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"ctrperf/internal/fsutil"
)

// Checkpoint remembers the original value of everything the controller has
// changed, so that a stop restores it exactly and a restart after a crash
// can reconcile. It is written atomically, with a checksum validated on load.
type Checkpoint struct {
	Version int       `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// CPUSets: container id -> original cpuset.cpus.
	CPUSets map[string]string `json:"cpusets"`
	// IRQs: IRQ number -> original smp_affinity_list.
	IRQs map[string]string `json:"irqs"`
	// RPS: "dev/rx-N" -> original rps_cpus mask.
	RPS map[string]string `json:"rps"`
	// Classes: container id -> original CPU class (cpu.idle and weight).
	Classes  map[string]CPUClass `json:"classes"`
	Checksum string              `json:"checksum"`
}

// checkpointVersion 2 added Classes; a version 1 checkpoint (no classes)
// is still read, so a controller of the previous release can be restored.
const checkpointVersion = 2

// NewCheckpoint returns an empty checkpoint for this process.
func NewCheckpoint(now time.Time) *Checkpoint {
	return &Checkpoint{Version: checkpointVersion, PID: os.Getpid(), Started: now,
		CPUSets: map[string]string{}, IRQs: map[string]string{}, RPS: map[string]string{}, Classes: map[string]CPUClass{}}
}

// Empty reports whether nothing is recorded.
func (c *Checkpoint) Empty() bool {
	return len(c.CPUSets) == 0 && len(c.IRQs) == 0 && len(c.RPS) == 0 && len(c.Classes) == 0
}

// RememberClass records a container's original CPU class unless already known.
func (c *Checkpoint) RememberClass(id string, orig CPUClass) bool {
	if _, ok := c.Classes[id]; ok {
		return false
	}
	c.Classes[id] = orig
	return true
}

// ForgetContainer drops everything recorded for a container; it reports
// whether there was anything.
func (c *Checkpoint) ForgetContainer(id string) bool {
	_, a := c.CPUSets[id]
	_, b := c.Classes[id]
	delete(c.CPUSets, id)
	delete(c.Classes, id)
	return a || b
}

// RememberCPUSet records a container's original cpuset unless already known.
func (c *Checkpoint) RememberCPUSet(id, orig string) bool {
	if _, ok := c.CPUSets[id]; ok {
		return false
	}
	c.CPUSets[id] = orig
	return true
}

// RememberIRQ records an IRQ's original affinity unless already known.
func (c *Checkpoint) RememberIRQ(irq int, orig string) bool {
	k := strconv.Itoa(irq)
	if _, ok := c.IRQs[k]; ok {
		return false
	}
	c.IRQs[k] = orig
	return true
}

// RememberRPS records a queue's original mask unless already known.
func (c *Checkpoint) RememberRPS(dev, queue, orig string) bool {
	k := dev + "/" + queue
	if _, ok := c.RPS[k]; ok {
		return false
	}
	c.RPS[k] = orig
	return true
}

func (c *Checkpoint) sum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%d|%d|%s|", c.Version, c.PID, c.Started.UTC().Format(time.RFC3339Nano))
	for _, m := range []map[string]string{c.CPUSets, c.IRQs, c.RPS} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%s;", k, m[k])
		}
		h.Write([]byte{'|'})
	}
	if c.Version >= 2 {
		ids := make([]string, 0, len(c.Classes))
		for id := range c.Classes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(h, "%s=%s;", id, c.Classes[id])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Save writes the checkpoint atomically and durably (fsutil.WriteFileAtomic):
// after a crash or power loss the file holds the previous checkpoint or
// this one, never a torn one, and a change is on disk before the kernel
// setting it guards is touched.
func (c *Checkpoint) Save(path string) error {
	c.Checksum = c.sum()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create checkpoint directory: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// ErrCorruptCheckpoint reports a checkpoint whose checksum does not match.
var ErrCorruptCheckpoint = errors.New("checkpoint is corrupt")

// LoadCheckpoint reads and validates a checkpoint. A missing file returns
// (nil, nil).
func LoadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorruptCheckpoint, err)
	}
	if c.Version != checkpointVersion && c.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, this ctrperf writes %d: %w", path, c.Version, checkpointVersion, ErrCorruptCheckpoint)
	}
	if c.CPUSets == nil {
		c.CPUSets = map[string]string{}
	}
	if c.IRQs == nil {
		c.IRQs = map[string]string{}
	}
	if c.RPS == nil {
		c.RPS = map[string]string{}
	}
	if c.Classes == nil {
		c.Classes = map[string]CPUClass{}
	}
	if c.Checksum != c.sum() {
		return nil, fmt.Errorf("%s: checksum mismatch: %w", path, ErrCorruptCheckpoint)
	}
	return &c, nil
}
