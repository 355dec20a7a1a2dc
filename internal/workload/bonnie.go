package workload

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func init() { Register(Bonnie{}) }

// Bonnie runs bonnie++ (seed 003's own tool: "Bonnie++ file I/O on AUFS vs
// devicemapper vs -v host volume") once inside the target, in the service's
// data directory, so that what is measured is the filesystem the
// configuration puts there (writable layer, volume, bind, tmpfs, the host's
// directory). Every phase's figure is a metric: sequential output per char
// and per block, rewrite, sequential input per char and per block (K/s and
// %CPU), random seeks/s, and files/s of sequential and random create, read
// (stat) and delete.
//
// bonnie++ is a fixed amount of work, not a timed window: the plan's
// warm-up and duration do not shorten it (the observer samples while it
// runs). The seed used a file twice the machine's RAM so that reads come
// from the disk; ctrperf leaves that to the configuration: a memory limit
// (resources.memory) caps the page cache of the target's cgroup, so a file
// twice the limit is read from the disk on either runtime; load.direct
// uses O_DIRECT (bonnie++ -D) for the bulk phases instead.
type Bonnie struct{}

var _ Workload = Bonnie{}

// Name implements Workload.
func (Bonnie) Name() string { return "bonnie" }

// BonnieLoad are the bonnie++ knobs.
type BonnieLoad struct {
	Size     int64  // -s: bytes of the bulk I/O file(s); 0 skips the bulk phases
	CharSize int64  // -f: bytes of the per-char phases; 0 skips them
	Files    int64  // -n: files of the create/read/delete phases, in units of 1024; 0 skips them
	Dirs     int64  // -n ...:dirs: directories the files are spread over
	Direct   bool   // -D: O_DIRECT for the bulk phases
	Primary  string // the phase whose rate is throughput_per_s
}

// DefaultBonnieLoad: 1 GiB of bulk I/O (so set resources.memory to 512m
// or less for the seed's file-twice-RAM), bonnie++'s own 20 MiB per-char
// size, 16 × 1024 empty files in 16 directories, sequential block input
// as the primary figure (the seed's headline: reads through AUFS).
var DefaultBonnieLoad = BonnieLoad{Size: 1 << 30, CharSize: 20 << 20, Files: 16, Dirs: 16, Primary: "get_block"}

// ParseBonnieLoad reads and checks the knobs.
func ParseBonnieLoad(m map[string]any) (BonnieLoad, error) {
	l := DefaultBonnieLoad
	k := newKnobs("load", m)
	// bonnie++ takes whole MiB; 0 skips the phases.
	k.size("size", &l.Size, 0, 1<<40)
	k.size("char_size", &l.CharSize, 0, 1<<40)
	whole(k, "files", &l.Files, 0, 4096)
	whole(k, "dirs", &l.Dirs, 0, 100000)
	k.bool("direct", &l.Direct)
	if _, set := k.m["char_size"]; l.Direct && !set {
		l.CharSize = 0 // bonnie++ -D cannot write one byte at a time
	}
	var names []string
	for _, p := range load.BonniePhases {
		names = append(names, p.Column)
	}
	k.enum("primary", &l.Primary, names...)
	if l.Size%(1<<20) != 0 {
		k.fail("size", fmtSize(l.Size), "bonnie++ takes whole MiB")
	}
	if l.CharSize%(1<<20) != 0 {
		k.fail("char_size", fmtSize(l.CharSize), "bonnie++ takes whole MiB")
	}
	if l.Direct && l.CharSize > 0 {
		k.fail("char_size", fmtSize(l.CharSize), "load.direct: bonnie++ -D fails the per-char phases (a one-byte write with O_DIRECT: \"Can't write() - disk full?\"); set char_size: 0")
	}
	if l.CharSize > l.Size && l.Size > 0 {
		k.fail("char_size", fmtSize(l.CharSize), "larger than load.size (%s)", fmtSize(l.Size))
	}
	if err := k.err(); err != nil {
		return l, err
	}
	p, _ := load.BonniePhaseByColumn(l.Primary)
	switch {
	case l.Size == 0 && p.Unit != "files":
		return l, knobError("load.primary", "load.primary = %s: a bulk phase, but load.size = 0 skips the bulk phases", l.Primary)
	case l.Files == 0 && p.Unit == "files":
		return l, knobError("load.primary", "load.primary = %s: a file phase, but load.files = 0 skips the file phases", l.Primary)
	case l.CharSize == 0 && (l.Primary == "putc" || l.Primary == "getc"):
		return l, knobError("load.primary", "load.primary = %s: a per-char phase, but load.char_size = 0 skips them", l.Primary)
	}
	return l, nil
}

// Decode implements Workload.
func (Bonnie) Decode(k Knobs) (any, any, error) {
	return decodeTool("bonnie", k, ParseBonnieLoad, "bonnie++'s sizes are chosen under load")
}

// Services implements Workload.
func (Bonnie) Services(c Config) ([]engine.Service, error) {
	return toolServices("bonnie", "io", c, "bonnie++")
}

// bonnieArgs are bonnie++'s arguments, run in the data directory: -q (the
// CSV line alone on stdout), -u root (it refuses root otherwise; the
// sleeper runs as root), -r 0 (no check of the size against the machine's
// RAM: the configuration's memory limit is what the page cache gets), one
// test run, a fixed seed for the random phases.
func bonnieArgs(l BonnieLoad, seed int64) []string {
	a := []string{"-d", ".", "-q", "-u", "root", "-r", "0", "-x", "1", "-m", "ctrperf",
		"-z", strconv.FormatInt(seed, 10),
		"-s", strconv.FormatInt(l.Size>>20, 10)}
	n := strconv.FormatInt(l.Files, 10)
	if l.Files > 0 && l.Dirs > 0 {
		n += ":0:0:" + strconv.FormatInt(l.Dirs, 10)
	}
	a = append(a, "-n", n)
	if l.Direct {
		a = append(a, "-D")
	}
	// -f takes an optional argument: attached, it is the per-char size in
	// MiB; alone (last, so that it takes nothing that follows), it skips
	// the per-char phases.
	if l.Size > 0 {
		if l.CharSize == 0 {
			a = append(a, "-f")
		} else {
			a = append(a, "-f"+strconv.FormatInt(l.CharSize>>20, 10))
		}
	}
	return a
}

// Drive implements Workload: one bonnie++ run; the window starts with it.
func (Bonnie) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(BonnieLoad)
	ex := inData(load.EngineExec(env.Engine, env.Target, "io"))
	if env.Started != nil {
		env.Started()
	}
	m, err := load.RunBonnie(ctx, ex, l.Primary, bonnieArgs(l, 2014)...)
	if err != nil {
		return m, fmt.Errorf("bonnie: %w", err)
	}
	if mem := env.Config.Resources.MemoryBytes; mem > 0 && l.Size > 0 && l.Size < 2*mem && !l.Direct {
		m.Notes = append(m.Notes, fmt.Sprintf("load.size %s is under twice the memory limit %s: part of the bulk reads may come from the page cache",
			fmtSize(l.Size), fmtSize(mem)))
	} else if mem == 0 && l.Size > 0 && !l.Direct {
		m.Notes = append(m.Notes, "no memory limit and buffered I/O: the bulk phases measure the page cache as much as the disk")
	}
	m.Metrics["direct"] = 0
	if l.Direct {
		m.Metrics["direct"] = 1
	}
	m.Tools["bonnie++ args"] = strings.Join(bonnieArgs(l, 2014), " ")
	return m, nil
}
