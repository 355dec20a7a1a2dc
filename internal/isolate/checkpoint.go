package isolate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	c.ForgetCPUSet(id)
	c.ForgetClass(id)
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

// ForgetCPUSet drops a container's cpuset original and what was written.
func (c *Checkpoint) ForgetCPUSet(id string) {
	delete(c.CPUSets, id)
	delete(c.Written.CPUSets, id)
}

// ForgetClass drops a container's CPU class original and what was written.
func (c *Checkpoint) ForgetClass(id string) {
	delete(c.Classes, id)
	delete(c.Written.Classes, id)
}

// ForgetIRQ drops an IRQ's original and what was written.
func (c *Checkpoint) ForgetIRQ(irq int) {
	k := strconv.Itoa(irq)
	delete(c.IRQs, k)
	delete(c.Written.IRQs, k)
}

// RebaseCPUSet takes cur, a cpuset someone else wrote over the
// controller's, as the container's original: nothing of the controller's
// is left there.
func (c *Checkpoint) RebaseCPUSet(id, cur string) {
	c.CPUSets[id] = cur
	delete(c.Written.CPUSets, id)
}

// RebaseClass is RebaseCPUSet for the CPU class.
func (c *Checkpoint) RebaseClass(id string, cur CPUClass) {
	c.Classes[id] = cur
	delete(c.Written.Classes, id)
}

// WriteCPUSet records, before the write, that v is about to replace cur
// in a container's cpuset; it reports whether the checkpoint changed.
func (c *Checkpoint) WriteCPUSet(id, cur, v string) bool {
	return noteWrite(c.Written.CPUSets, id, cur, v, sameCPUs)
}

// WriteClass is WriteCPUSet for the CPU class.
func (c *Checkpoint) WriteClass(id string, cur, v CPUClass) bool {
	return noteWrite(c.Written.Classes, id, cur, v, CPUClass.Same)
}

// WriteIRQ is WriteCPUSet for an IRQ's affinity.
func (c *Checkpoint) WriteIRQ(irq int, cur, v string) bool {
	return noteWrite(c.Written.IRQs, strconv.Itoa(irq), cur, v, sameCPUs)
}

// WriteRPS is WriteCPUSet for a queue's RPS mask.
func (c *Checkpoint) WriteRPS(dev, queue, cur, v string) bool {
	return noteWrite(c.Written.RPS, dev+"/"+queue, cur, v, sameMask)
}

// noteWrite makes v the value last written to key, keeping cur as well
// when it is one the controller wrote: the checkpoint is saved before the
// write, and until the write lands cur is what the kernel holds.
func noteWrite[V any](m map[string][]V, key string, cur, v V, same func(a, b V) bool) bool {
	old := m[key]
	next := []V{v}
	if !same(cur, v) && slices.ContainsFunc(old, func(w V) bool { return same(w, cur) }) {
		next = append(next, cur)
	}
	m[key] = next
	return !slices.EqualFunc(old, next, same)
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
