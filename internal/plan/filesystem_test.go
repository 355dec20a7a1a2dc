package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const fsPlanHead = "name: fs\nworkload: testweb\nbaseline: base\nconfigurations:\n"

func TestFilesystemKnob(t *testing.T) {
	src := fsPlanHead +
		"  - {name: base, runtime: host, filesystem: {type: ext4}}\n" +
		"  - name: wb\n" +
		"    runtime: docker\n" +
		"    data: bind\n" +
		"    filesystem:\n" +
		"      type: ext4\n" +
		"      options: [noatime, data=writeback, discard, barrier=0]\n" +
		"      size: 1g\n" +
		"  - {name: x, runtime: host, filesystem: {type: xfs, options: \"noatime,logbufs=8\"}}\n"
	p, err := Parse("fs.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := p.Config("wb")
	want := FilesystemSpec{Type: "ext4", Options: []string{"noatime", "data=writeback", "discard", "barrier=0"}, Size: 1 << 30}
	if !reflect.DeepEqual(wb.Filesystem, want) {
		t.Errorf("wb filesystem = %+v, want %+v", wb.Filesystem, want)
	}
	x, _ := p.Config("x")
	if !reflect.DeepEqual(x.Filesystem.Options, []string{"noatime", "logbufs=8"}) || x.Filesystem.SizeOrDefault() != DefaultFilesystemSize {
		t.Errorf("x filesystem = %+v", x.Filesystem)
	}
	if got := wb.Filesystem.Key(); got != "ext4(noatime,data=writeback,discard,barrier=0)" {
		t.Errorf("Key = %q", got)
	}
	// The canonical form keeps it, and parses back to the same knobs.
	canon, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "filesystem:") {
		t.Fatalf("canonical form lost the filesystem:\n%s", canon)
	}
	again, err := Parse("canon.yaml", canon, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
	}
	wb2, _ := again.Config("wb")
	if !reflect.DeepEqual(wb2.Filesystem, want) {
		t.Errorf("after canonical: %+v, want %+v", wb2.Filesystem, want)
	}
	if m := wb.KnobMap(); m["filesystem"] == nil {
		t.Errorf("KnobMap has no filesystem: %v", m)
	}
}

func TestFilesystemMatrixAxis(t *testing.T) {
	src := "name: fs\nworkload: testweb\nbaseline: host-ext4\nmatrix:\n" +
		"  base: {runtime: host}\n  name: \"host-{filesystem.type}\"\n  filesystem.type: [ext4, xfs]\n"
	p, err := Parse("fs.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if x, ok := p.Config("host-xfs"); !ok || x.Filesystem.Type != "xfs" {
		t.Fatalf("configs %v", p.Names())
	}
}

func TestFilesystemErrors(t *testing.T) {
	base := "  - {name: base, runtime: host, filesystem: {type: ext4}}\n"
	cases := []struct {
		name, configs string
		line          int
		want          string
	}{
		{"unknown type", "  - {name: base, runtime: host, filesystem: {type: ext3}}\n", 5, `"ext3" is not valid; did you mean "ext4"?`},
		{"unknown key", "  - {name: base, runtime: host, filesystem: {type: ext4, mount: x}}\n", 5, `unknown key; expected one of`},
		{"unknown option", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [noatim]}}\n", 6, `unknown mount option "noatim"; did you mean "noatime"?`},
		{"option of another fs", base + "  - {name: b, runtime: host, filesystem: {type: xfs, options: [data=writeback]}}\n", 6, `"data=writeback" is not an option of xfs`},
		{"xfs nobarrier", base + "  - {name: b, runtime: host, filesystem: {type: xfs, options: [noatime, nobarrier]}}\n", 6, `xfs removed barrier/nobarrier in Linux 4.19`},
		{"bad value", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [data=fast]}}\n", 6, `"fast" is not valid; expected one of "ordered", "writeback", "journal"`},
		{"value missing", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [data]}}\n", 6, `needs a value: data=ordered|writeback|journal`},
		{"value on a flag", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [noatime=1]}}\n", 6, `takes no value; write "noatime"`},
		{"bad commit", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [commit=x]}}\n", 6, `expected a positive number of seconds`},
		{"two atimes", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [noatime, relatime]}}\n", 6, `both atime modes`},
		{"barrier twice", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: [nobarrier, barrier=1]}}\n", 6, `set the same option`},
		{"too small", base + "  - {name: b, runtime: host, filesystem: {type: xfs, size: 100m}}\n", 6, `below the minimum of 512m`},
		{"options without type", base + "  - {name: b, runtime: host, filesystem: {options: [noatime]}}\n", 6, `filesystem.options needs a filesystem type`},
		{"layer", base + "  - {name: b, runtime: docker, filesystem: {type: ext4}}\n", 6, `"layer" cannot live on filesystem ext4`},
		{"volume", base + "  - {name: b, runtime: docker, data: volume, filesystem: {type: xfs}}\n", 6, `use data: bind`},
		{"not a list", base + "  - {name: b, runtime: host, filesystem: {type: ext4, options: {a: 1}}}\n", 6, `expected a list of mount options`},
		{"baseline without", "  - {name: base, runtime: host}\n  - {name: b, runtime: host, filesystem: {type: xfs}}\n", 5, `missing on the baseline while b put their data on a loop-mounted filesystem`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("fs.yaml", []byte(fsPlanHead+tc.configs), Options{Schema: testSchema{}})
			wantFieldError(t, err, tc.line, tc.want)
		})
	}
}

func TestCheckMountOption(t *testing.T) {
	ok := [][2]string{{"ext4", "noatime"}, {"ext4", "nobarrier"}, {"ext4", "barrier"}, {"ext4", "data=journal"}, {"xfs", "logbsize=256k"},
		{"btrfs", "compress=zstd"}, {"btrfs", "commit=30"}, {"xfs", "discard"}, {"btrfs", "nobarrier"}}
	for _, c := range ok {
		if why := CheckMountOption(c[0], c[1]); why != "" {
			t.Errorf("%s %s refused: %s", c[0], c[1], why)
		}
	}
	for _, c := range [][2]string{{"xfs", "barrier"}, {"xfs", "logbufs=9"}, {"ext4", "compress=zstd"}, {"btrfs", "ro"}} {
		if why := CheckMountOption(c[0], c[1]); why == "" {
			t.Errorf("%s %s accepted", c[0], c[1])
		}
	}
}

// wantFieldError fails t unless err holds a *FieldError whose message
// contains want, at line; it returns how many errors err holds.
func wantFieldError(t *testing.T, err error, line int, want string) int {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T: %v", err, err)
	}
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) && strings.Contains(fe.Msg, want) {
			if fe.Line != line {
				t.Errorf("line %d, want %d: %v", fe.Line, line, fe)
			}
			return len(errs)
		}
	}
	t.Errorf("no error containing %q in:\n%v", want, err)
	return len(errs)
}
