package plan

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The filesystem knob puts the services' data directory on a filesystem of
// ctrperf's own: a sparse image file of Size bytes, made with mkfs.<type>,
// attached to a loop device and mounted with Options (seed 004: ext4 vs xfs,
// noatime, data=writeback, discard, barrier=0). The host runtime's data
// directory and Docker's bind-mounted directory are made on it, so a plan
// compares filesystems and mount options on the same kind of device.
//
//	filesystem: {type: ext4, options: [noatime, data=writeback], size: 2g}
//
// Only the vocabulary is checked here; whether this kernel accepts an
// option is found by mounting (ctrperf doctor, and each run, which is
// recorded not_run with the kernel's answer when it does not).

// FilesystemSpec is a loop-backed filesystem for the data. The zero value
// means none: the data lives where the placement puts it.
type FilesystemSpec struct {
	Type    string   `json:"type,omitempty" yaml:"type,omitempty"`
	Options []string `json:"options,omitempty" yaml:"options,omitempty"`
	Size    int64    `json:"size,omitempty" yaml:"size,omitempty"` // bytes; DefaultFilesystemSize when 0
}

// DefaultFilesystemSize is the size of the sparse image file when the plan
// gives none: only what is written takes disk space.
const DefaultFilesystemSize = 2 << 30

// MinFilesystemSize is the smallest image: mkfs.xfs refuses below 300 MiB.
const MinFilesystemSize = 512 << 20

// FilesystemTypes are the filesystems the knob can make.
var FilesystemTypes = []string{"ext4", "xfs", "btrfs"}

var filesystemKeys = []string{"type", "options", "size"}

// On says whether the configuration asks for a filesystem of its own.
func (f FilesystemSpec) On() bool { return f.Type != "" }

// SizeOrDefault is the image size in bytes.
func (f FilesystemSpec) SizeOrDefault() int64 {
	if f.Size == 0 {
		return DefaultFilesystemSize
	}
	return f.Size
}

// Key is a short description: "ext4", "ext4(noatime,data=writeback)".
func (f FilesystemSpec) Key() string {
	if !f.On() {
		return ""
	}
	if len(f.Options) == 0 {
		return f.Type
	}
	return f.Type + "(" + strings.Join(f.Options, ",") + ")"
}

// mountOption describes one option of the vocabulary: values it takes
// (nil: none; a single "" entry: any positive integer) and the types it
// exists on (nil: every type). why, when set, refuses it with that reason.
type mountOption struct {
	values []string
	types  []string
	why    map[string]string // type → reason it is refused there
}

const intValue = "<n>"

// mountOptions is the vocabulary. The atime and sync options are the VFS's
// (mount flags); the rest are each filesystem's own.
var mountOptions = map[string]mountOption{
	"noatime":     {},
	"nodiratime":  {},
	"relatime":    {},
	"strictatime": {},
	"lazytime":    {},
	"sync":        {},
	"dirsync":     {},
	"discard":     {},
	"nodiscard":   {},
	"data":        {values: []string{"ordered", "writeback", "journal"}, types: []string{"ext4"}},
	"barrier": {values: []string{"", "0", "1"}, types: []string{"ext4", "xfs", "btrfs"}, why: map[string]string{
		"xfs": "xfs removed barrier/nobarrier in Linux 4.19 (it always flushes the device cache; the seed's 2.6.32 kernel still had it)"}},
	"nobarrier": {types: []string{"ext4", "xfs", "btrfs"}, why: map[string]string{
		"xfs": "xfs removed barrier/nobarrier in Linux 4.19 (it always flushes the device cache; the seed's 2.6.32 kernel still had it)"}},
	"commit":           {values: []string{intValue}, types: []string{"ext4", "btrfs"}},
	"nodelalloc":       {types: []string{"ext4"}},
	"delalloc":         {types: []string{"ext4"}},
	"dioread_nolock":   {types: []string{"ext4"}},
	"journal_checksum": {types: []string{"ext4"}},
	"logbufs":          {values: []string{"2", "3", "4", "5", "6", "7", "8"}, types: []string{"xfs"}},
	"logbsize":         {values: []string{"16k", "32k", "64k", "128k", "256k"}, types: []string{"xfs"}},
	"largeio":          {types: []string{"xfs"}},
	"inode64":          {types: []string{"xfs"}},
	"compress":         {values: []string{"zlib", "lzo", "zstd", "no"}, types: []string{"btrfs"}},
	"nodatacow":        {types: []string{"btrfs"}},
	"nodatasum":        {types: []string{"btrfs"}},
	"ssd":              {types: []string{"btrfs"}},
	"nossd":            {types: []string{"btrfs"}},
}

// atimeOptions exclude each other.
var atimeOptions = []string{"noatime", "relatime", "strictatime"}

func mountOptionNames() []string {
	out := make([]string, 0, len(mountOptions))
	for k := range mountOptions {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

// CheckMountOption says why option cannot be given to a filesystem of type
// fs ("" when it can, as far as the vocabulary goes).
func CheckMountOption(fs, option string) string {
	name, value, hasValue := strings.Cut(option, "=")
	mo, ok := mountOptions[name]
	if !ok {
		msg := fmt.Sprintf("unknown mount option %q", option)
		if c := closest(name, mountOptionNames()); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		} else {
			msg += "; expected one of " + strings.Join(mountOptionNames(), ", ")
		}
		return msg
	}
	if mo.types != nil && !contains(mo.types, fs) {
		return fmt.Sprintf("mount option %q is not an option of %s (it is one of %s)", option, fs, strings.Join(mo.types, ", "))
	}
	if why := mo.why[fs]; why != "" {
		return fmt.Sprintf("mount option %q: %s", option, why)
	}
	switch {
	case mo.values == nil && hasValue:
		return fmt.Sprintf("mount option %q takes no value; write %q", option, name)
	case mo.values != nil && !hasValue && !contains(mo.values, ""):
		return fmt.Sprintf("mount option %q needs a value: %s=%s", option, name, strings.Join(nonEmpty(mo.values), "|"))
	case mo.values != nil && hasValue && len(mo.values) == 1 && mo.values[0] == intValue:
		if v, err := strconv.Atoi(value); err != nil || v <= 0 {
			return fmt.Sprintf("mount option %q: expected a positive number of seconds like %s=30", option, name)
		}
	case mo.values != nil && hasValue && !contains(nonEmpty(mo.values), value):
		return fmt.Sprintf("mount option %q: %q is not valid; expected %s", option, value, oneOf(nonEmpty(mo.values)))
	}
	return ""
}

func nonEmpty(vals []string) []string {
	var out []string
	for _, v := range vals {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// setFilesystem decodes `filesystem` (a mapping) or one of its keys
// (`filesystem.type`, a matrix axis).
func (d *decoder) setFilesystem(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["filesystem."+key] = n
	switch key {
	case "type":
		if s, ok := d.enum(n, field, FilesystemTypes); ok {
			k.Filesystem.Type = s
		}
	case "options":
		k.Filesystem.Options = d.mountOptionList(n, field)
	case "size":
		if v, ok := d.fsSize(n, field); ok {
			k.Filesystem.Size = v
		}
	default:
		d.unknownSub(n, field, key, filesystemKeys)
	}
}

// mountOptionList reads a list of options, or one string of them separated
// by commas as mount -o takes them.
func (d *decoder) mountOptionList(n *yaml.Node, field string) []string {
	n = deref(n)
	var out []string
	add := func(s string, at *yaml.Node, f string) {
		s = strings.TrimSpace(s)
		if s == "" || strings.ContainsAny(s, " \t\n") {
			d.errorf(at, f, "%q is not a mount option; expected a word like noatime or data=writeback", s)
			return
		}
		out = append(out, s)
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		for _, s := range strings.Split(n.Value, ",") {
			add(s, n, field)
		}
	case n.Kind == yaml.SequenceNode:
		for i, it := range n.Content {
			if s, ok := d.str(it, index(field, i)); ok {
				add(s, it, index(field, i))
			}
		}
	default:
		d.errorf(n, field, "expected a list of mount options like [noatime, data=writeback], got %s", describe(n))
	}
	return out
}

func (d *decoder) fsSize(n *yaml.Node, field string) (int64, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.errorf(n, field, "expected a size like 2g, got %s", describe(n))
		return 0, false
	}
	v, err := ParseMemory(n.Value)
	if err != nil || v <= 0 {
		d.errorf(n, field, "%q: expected a positive size like 2g", n.Value)
		return 0, false
	}
	if v < MinFilesystemSize {
		d.errorf(n, field, "%q is below the minimum of 512m (mkfs.xfs refuses less than 300 MiB)", n.Value)
		return 0, false
	}
	return v, true
}

// checkFilesystem checks a complete configuration's filesystem: a type,
// options of that type that do not contradict each other, and a placement
// that puts the data in a directory of the host (bind).
func (d *decoder) checkFilesystem(c *Configuration) {
	f := c.Filesystem
	field := func(k string) string { return join(c.Origin, k) }
	if !f.On() {
		for _, k := range []string{"options", "size"} {
			if n, ok := c.nodes["filesystem."+k]; ok {
				d.errorf(n, field("filesystem.type"), "missing; filesystem.%s needs a filesystem type: %s", k, oneOf(FilesystemTypes))
				return
			}
		}
		return
	}
	on := c.node("filesystem.options")
	seen := map[string]string{}
	atime := ""
	for _, o := range f.Options {
		if why := CheckMountOption(f.Type, o); why != "" {
			d.errorf(on, field("filesystem.options"), "%s", why)
			continue
		}
		name, _, _ := strings.Cut(o, "=")
		if name == "nobarrier" {
			name = "barrier"
		}
		if prev, ok := seen[name]; ok {
			d.errorf(on, field("filesystem.options"), "%q and %q set the same option; keep one", prev, o)
			continue
		}
		seen[name] = o
		if contains(atimeOptions, name) {
			if atime != "" {
				d.errorf(on, field("filesystem.options"), "%q and %q are both atime modes; keep one", atime, o)
			}
			atime = o
		}
	}
	if c.Data != DataBind {
		d.errorf(c.node("data"), field("data"), "%q cannot live on filesystem %s: the data directory is made on the mounted filesystem and, for docker, bind-mounted into the container; use data: bind", c.Data, f.Key())
	}
}

// checkFilesystemBaseline: when configurations compare filesystems, the
// baseline must be on a loop-mounted filesystem too, or the comparison
// measures the loop device and the image file along with the filesystem.
func (d *decoder) checkFilesystemBaseline(configs []Configuration, baseline string) {
	var base *Configuration
	var withFS []string
	for i := range configs {
		c := &configs[i]
		if c.Name == baseline {
			base = c
		}
		if c.Filesystem.On() {
			withFS = append(withFS, c.Name)
		}
	}
	if base == nil || base.Filesystem.On() || len(withFS) == 0 {
		return
	}
	if len(withFS) > 3 {
		withFS = append(withFS[:3], "…")
	}
	d.errorf(base.node("name"), join(base.Origin, "filesystem"),
		"missing on the baseline while %s put their data on a loop-mounted filesystem; give the baseline one too (e.g. filesystem: {type: ext4}) so that only the filesystem differs", strings.Join(withFS, ", "))
}

// canonFilesystem is the filesystem as the canonical plan spells it.
type canonFilesystem struct {
	Type    string   `yaml:"type"`
	Options []string `yaml:"options,omitempty"`
	Size    string   `yaml:"size,omitempty"`
}

func canonicalFilesystem(f FilesystemSpec) *canonFilesystem {
	if !f.On() {
		return nil
	}
	cf := &canonFilesystem{Type: f.Type, Options: f.Options}
	if f.Size != 0 {
		cf.Size = strconv.FormatInt(f.Size, 10)
	}
	return cf
}
