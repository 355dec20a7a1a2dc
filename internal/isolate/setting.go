package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// Actuators are the kernel writers of the checkpointed kinds; a nil one
// is an error only if there is something to write for it.
type Actuators struct {
	CPUs  CPUSetter
	Class Demoter
	IRQ   IRQSetter
	RPS   RPSSetter
}

// setting is one kind of checkpointed value as the controller and a
// restore see it: how to read, write, compare and name one. The controller
// writes every kind through applyValue, a restore through restoreKind; a
// kind the Kubernetes runtime adds is one more setting and record.
type setting[V any] struct {
	what  string // "cpuset", "CPU class", "IRQ affinity", "RPS mask"
	label string // the write-failure metric's kind: cpuset, class, irq, rps
	// read and write are nil when there is no actuator for the kind.
	read  func(ctx context.Context, key string) (V, error)
	write func(ctx context.Context, key string, v V) error
	same  func(a, b V) bool
	str   func(V) string
	// gone: the error only means the container, IRQ or veth went away.
	gone func(err error) bool
	// landed: the write took although it reports an error (an IRQ whose
	// effective affinity lags): the value is the controller's.
	landed func(err error) bool
	// skip: a refusal the controller does not retry for a while (a
	// managed IRQ); nil: none.
	skip  func(err error) bool
	event func(key string) Event // the event naming key
}

// settings are the four kinds over one set of actuators.
type settings struct {
	cpusets setting[string]
	classes setting[CPUClass]
	irqs    setting[string]
	rps     setting[string]
}

func newSettings(a Actuators) settings {
	return settings{cpusets: cpusetSetting(a.CPUs), classes: classSetting(a.Class), irqs: irqSetting(a.IRQ), rps: rpsSetting(a.RPS)}
}

// dryRun is s writing nothing (dryrun.go).
func (s settings) dryRun() settings {
	return settings{cpusets: dryRun(s.cpusets), classes: dryRun(s.classes), irqs: dryRun(s.irqs), rps: dryRun(s.rps)}
}

// ErrContainerGone lets a CPUSetter say the container no longer exists.
var ErrContainerGone = errors.New("container is gone")

// gone reports an error that only means the container went away: its
// cgroup directory is missing, or (ENODEV) it was removed while the file was
// open, which v1's kernfs answers for a cgroup being destroyed.
func gone(err error) bool {
	return errors.Is(err, ErrContainerGone) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// canonCPUs is a CPU list as the kernel prints it ("0,1,2" is "0-2").
func canonCPUs(s string) string {
	set, err := cpuset.Parse(strings.TrimSpace(s))
	if err != nil {
		return strings.TrimSpace(s)
	}
	return set.String()
}

func ident(s string) string { return s }

func never(error) bool { return false }

// notExist: an IRQ that went away with its device, a veth with its container.
func notExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// devGone: a veth that went away with its container, its queue's directory
// missing, or (ENODEV) the device unregistered while its rps_cpus was being
// written (TestChurnDocker met it when a container was removed mid-write).
func devGone(err error) bool { return notExist(err) || errors.Is(err, syscall.ENODEV) }

func containerEvent(id string) Event { return Event{Container: id} }

func classSetting(d Demoter) setting[CPUClass] {
	s := setting[CPUClass]{what: "CPU class", label: "class", same: CPUClass.Same, str: CPUClass.String,
		gone: gone, landed: never, event: containerEvent}
	if d != nil {
		s.read, s.write = d.Class, d.SetClass
	}
	return s
}

func cpusetSetting(c CPUSetter) setting[string] {
	s := setting[string]{what: "cpuset", label: "cpuset", same: sameCPUs, str: ident, gone: gone, landed: never, event: containerEvent}
	if c != nil {
		s.read = func(ctx context.Context, id string) (string, error) {
			v, err := c.CPUs(ctx, id)
			return canonCPUs(v), err
		}
		s.write = func(ctx context.Context, id, v string) error {
			set, err := parseCPUs(v)
			if err != nil {
				return fmt.Errorf("cpuset %q for %s: %w", v, short(id), err)
			}
			return c.SetCPUs(ctx, id, set)
		}
	}
	return s
}

// parseCPUs parses a CPU list to write: never an empty one.
func parseCPUs(v string) (cpuset.CPUSet, error) {
	set, err := cpuset.Parse(v)
	if err == nil && set.IsEmpty() {
		err = errors.New("not applied (never an empty set)")
	}
	return set, err
}

// irqRefused: the kernel keeps the IRQ where it is (a managed interrupt,
// or one the interrupt controller cannot move).
func irqRefused(err error) bool {
	return errors.Is(err, ErrIRQNotMoved) || errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL)
}

func irqSetting(p IRQSetter) setting[string] {
	num := func(k string) int { n, _ := strconv.Atoi(k); return n }
	s := setting[string]{what: "IRQ affinity", label: "irq", same: sameCPUs, str: ident, gone: notExist,
		landed: func(err error) bool { return errors.Is(err, ErrIRQNotMoved) }, skip: irqRefused,
		event: func(k string) Event { return Event{IRQ: num(k)} }}
	if p != nil {
		s.read = func(_ context.Context, k string) (string, error) {
			set, err := p.Affinity(num(k))
			return set.String(), err
		}
		s.write = func(_ context.Context, k, v string) error {
			set, err := parseCPUs(v)
			if err != nil {
				return fmt.Errorf("affinity %q for IRQ %s: %w", v, k, err)
			}
			_, err = p.SetAffinity(num(k), set)
			return err
		}
	}
	return s
}

// rpsKey splits "dev/rx-N".
func rpsKey(k string) (dev, queue string) {
	dev, queue = filepath.Split(k)
	return filepath.Clean(dev), queue
}

func rpsSetting(r RPSSetter) setting[string] {
	s := setting[string]{what: "RPS mask", label: "rps", same: sameMask, str: ident, gone: devGone, landed: never,
		event: func(k string) Event { return Event{Device: k} }}
	if r != nil {
		s.read = func(_ context.Context, k string) (string, error) {
			dev, q := rpsKey(k)
			m, err := r.Masks(dev)
			if err != nil {
				return "", err
			}
			v, ok := m[q]
			if !ok {
				return "", fmt.Errorf("%s has no queue %s: %w", dev, q, os.ErrNotExist)
			}
			return v, nil
		}
		s.write = func(_ context.Context, k, v string) error {
			dev, q := rpsKey(k)
			return r.SetMask(dev, q, v)
		}
	}
	return s
}
