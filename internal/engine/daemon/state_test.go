package daemon

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	return buildOptions([]Option{WithRunDir(filepath.Join(dir, "run")), WithLibDir(filepath.Join(dir, "lib")), WithKernel(kernel.NewFS(kernel.Roots{Proc: "testdata/proc", Sys: filepath.Join(dir, "sys")}))})
}

func TestStateRoundTrip(t *testing.T) {
	o := testOptions(t)
	spec := engine.EngineSpec{StorageDriver: "btrfs", DataRoot: "loop-btrfs", UserlandProxy: boolp(false)}
	st := newState(o, engineName(spec, "run7"), "run7", spec)
	st.PID = 4242
	st.Subnet = "10.213.3.0/24"
	st.Loop.Device = "/dev/loop9"
	if err := writeState(o, st); err != nil {
		t.Fatal(err)
	}
	// A start killed before its first write leaves only a directory.
	if err := os.MkdirAll(stateDir(o, "ctrperf-vfs-native-run8"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := readState(o, st.Name)
	if err != nil {
		t.Fatal(err)
	}
	// JSON keeps time at its own precision; compare the rest exactly.
	if !got.Started.Equal(st.Started) {
		t.Errorf("started %v, want %v", got.Started, st.Started)
	}
	got.Started = st.Started
	if !reflect.DeepEqual(got, st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, st)
	}
	all, errs := listStates(o)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(all) != 2 || all[0].Name != "ctrperf-btrfs-loop-btrfs-noproxy-run7" || all[1].Name != "ctrperf-vfs-native-run8" {
		t.Errorf("listStates = %+v", all)
	}
}

func TestParseStateRejects(t *testing.T) {
	tests := []struct {
		desc, input string
	}{
		{"not json", "pid=3"},
		{"no name", `{"pid": 3}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := parseState(strings.NewReader(tt.input)); err == nil {
				t.Error("want an error")
			}
		})
	}
}

// TestTeardownFilesOnly runs the shared teardown on an engine whose dockerd,
// bridge and loop never came to be (a start that failed early): it must
// remove its directories and state and nothing outside ctrperf's roots.
func TestTeardownFilesOnly(t *testing.T) {
	o := testOptions(t)
	outside := t.TempDir()
	st := newState(o, "ctrperf-vfs-native-r1", "r1", engine.EngineSpec{StorageDriver: "vfs"})
	st.Bridge = "" // no netlink in a unit test
	for _, d := range []string{st.ExecRoot, st.DataRoot, filepath.Join(st.DataRoot, "vfs", "dir")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeState(o, st); err != nil {
		t.Fatal(err)
	}
	hostile := *st
	hostile.Name = "ctrperf-hostile"
	hostile.DataRoot = outside // a corrupt state must not delete outside the lib dir
	if err := writeState(o, &hostile); err != nil {
		t.Fatal(err)
	}

	done, err := teardown(context.Background(), o, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{st.ExecRoot, st.DataRoot, stateDir(o, st.Name)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after teardown (did: %v)", p, done)
		}
	}
	if _, err := teardown(context.Background(), o, &hostile, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("teardown removed %s, outside ctrperf's roots", outside)
	}
	if _, err := teardown(context.Background(), o, st, nil); err != nil {
		t.Errorf("second teardown must be a no-op, got %v", err)
	}
}

func TestParseStoreBridges(t *testing.T) {
	tests := []struct {
		desc  string
		input string
		want  []string
	}{
		{"bolt bytes with one network twice", "\x00\x01{\"BridgeName\":\"br-b2fabd1d44a5\"}\x00docker/network/v1.0/bridge/b2fa\x00br-b2fabd1d44a5\x02", []string{"br-b2fabd1d44a5"}},
		{"the default bridge is not a br- name", "{\"BridgeName\":\"ctrperf5b6bcf40\"}", nil},
		{"two networks", "br-0123456789ab..br-ba9876543210", []string{"br-0123456789ab", "br-ba9876543210"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := parseStoreBridges(strings.NewReader(tt.input)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
