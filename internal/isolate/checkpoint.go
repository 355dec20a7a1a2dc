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
	"strings"
	"time"

	"ctrperf/internal/fsutil"
)

// Checkpoint remembers the original value of everything the controller has
// changed, and what it wrote there, so that a stop restores it exactly and
// a restart after a crash can reconcile: a value is put back only where the
// kernel still holds what the controller wrote. It is written atomically,
// with a checksum validated on load.
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
	Classes map[string]CPUClass `json:"classes"`
	// Written is what the controller wrote over each original, by the
	// same keys. Empty in a checkpoint before version 3.
	Written  Written `json:"written"`
	Checksum string  `json:"checksum"`
}

// Written holds, per checkpointed value, the value the controller last
// wrote and, when the kernel held one of the controller's values at that
// moment, that one too: the checkpoint is saved before the write, so after
// a crash between the two the earlier value is still the controller's.
// Restoring a value the kernel no longer holds any of these for would undo
// a later `docker update`, irqbalance or an operator.
type Written struct {
	CPUSets map[string][]string   `json:"cpusets,omitempty"`
	IRQs    map[string][]string   `json:"irqs,omitempty"`
	RPS     map[string][]string   `json:"rps,omitempty"`
	Classes map[string][]CPUClass `json:"classes,omitempty"`
}

// checkpointVersion 3 added Written, 2 added Classes. Older checkpoints are
// still read, so that a controller of a previous release can be restored;
// they do not say what was written, so their values are all put back, as
// that release would have done (knowing nothing, leaving the controller's
// IRQ and cpuset confinement in place is the worse failure).
const checkpointVersion = 3

// KnowsWritten says whether the checkpoint records what was written (a
// checkpoint before version 3 does not).
func (c *Checkpoint) KnowsWritten() bool { return c.Version >= 3 }

// NewCheckpoint returns an empty checkpoint for this process.
func NewCheckpoint(now time.Time) *Checkpoint {
	c := &Checkpoint{Version: checkpointVersion, PID: os.Getpid(), Started: now}
	c.init()
	return c
}

// init makes every map of c (a new or a decoded checkpoint) writable.
func (c *Checkpoint) init() {
	for _, m := range []*map[string]string{&c.CPUSets, &c.IRQs, &c.RPS} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	if c.Classes == nil {
		c.Classes = map[string]CPUClass{}
	}
	for _, m := range []*map[string][]string{&c.Written.CPUSets, &c.Written.IRQs, &c.Written.RPS} {
		if *m == nil {
			*m = map[string][]string{}
		}
	}
	if c.Written.Classes == nil {
		c.Written.Classes = map[string][]CPUClass{}
	}
}

// Empty reports whether nothing is recorded.
func (c *Checkpoint) Empty() bool {
	return len(c.CPUSets) == 0 && len(c.IRQs) == 0 && len(c.RPS) == 0 && len(c.Classes) == 0
}

// The checkpoint's four kinds as records (state_checkpoint.go).
func (c *Checkpoint) cpusets() record[string] {
	return record[string]{orig: c.CPUSets, written: c.Written.CPUSets, same: sameCPUs}
}

func (c *Checkpoint) classes() record[CPUClass] {
	return record[CPUClass]{orig: c.Classes, written: c.Written.Classes, same: CPUClass.Same}
}

func (c *Checkpoint) irqs() record[string] {
	return record[string]{orig: c.IRQs, written: c.Written.IRQs, same: sameCPUs}
}

func (c *Checkpoint) rpsMasks() record[string] {
	return record[string]{orig: c.RPS, written: c.Written.RPS, same: sameMask}
}

// ForgetContainer drops everything recorded for a container; it reports
// whether there was anything.
func (c *Checkpoint) ForgetContainer(id string) bool {
	a := c.cpusets().forget(id)
	b := c.classes().forget(id)
	return a || b
}

// RememberCPUSet records a container's original cpuset unless already known.
func (c *Checkpoint) RememberCPUSet(id, orig string) bool { return c.cpusets().remember(id, orig) }

// RememberClass records a container's original CPU class unless already known.
func (c *Checkpoint) RememberClass(id string, orig CPUClass) bool {
	return c.classes().remember(id, orig)
}

// RememberIRQ records an IRQ's original affinity unless already known.
func (c *Checkpoint) RememberIRQ(irq int, orig string) bool {
	return c.irqs().remember(strconv.Itoa(irq), orig)
}

// RememberRPS records a queue's original mask unless already known.
func (c *Checkpoint) RememberRPS(dev, queue, orig string) bool {
	return c.rpsMasks().remember(dev+"/"+queue, orig)
}

// WriteCPUSet records, before the write, that v is about to replace cur
// in a container's cpuset; it reports whether the checkpoint changed.
func (c *Checkpoint) WriteCPUSet(id, cur, v string) bool { return c.cpusets().noteWrite(id, cur, v) }

// WriteIRQ is WriteCPUSet for an IRQ's affinity.
func (c *Checkpoint) WriteIRQ(irq int, cur, v string) bool {
	return c.irqs().noteWrite(strconv.Itoa(irq), cur, v)
}

// sameCPUs compares two CPU lists as sets ("0-1" is "0,1").
func sameCPUs(a, b string) bool { return canonCPUs(a) == canonCPUs(b) }

// sameMask compares two hex CPU masks as sets ("3" is "00000003").
func sameMask(a, b string) bool {
	x, errA := ParseHexMask(a)
	y, errB := ParseHexMask(b)
	if errA != nil || errB != nil {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	return x.Equals(y)
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
	if c.Version >= 3 {
		b, _ := json.Marshal(c.Written) // maps encode with sorted keys
		h.Write(b)
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
	if c.Version < 1 || c.Version > checkpointVersion {
		return nil, fmt.Errorf("%s: version %d, this ctrperf writes %d: %w", path, c.Version, checkpointVersion, ErrCorruptCheckpoint)
	}
	c.init()
	if c.Checksum != c.sum() {
		return nil, fmt.Errorf("%s: checksum mismatch: %w", path, ErrCorruptCheckpoint)
	}
	return &c, nil
}
