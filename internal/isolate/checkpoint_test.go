package isolate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckpointSaveLoad(t *testing.T) {
	started := time.Date(2026, 11, 23, 17, 21, 0, 0, time.UTC)
	full := func() *Checkpoint {
		c := NewCheckpoint(started)
		c.RememberCPUSet("a", "0-3")
		c.RememberIRQ(38, "0-1")
		c.RememberRPS("veth1", "rx-0", "3")
		return c
	}
	tests := []struct {
		desc  string
		setup func(t *testing.T, path string) // before the save
		save  *Checkpoint
		want  map[string]string // the CPUSets read back
	}{
		{desc: "new checkpoint in a directory that does not exist yet", save: full(), want: map[string]string{"a": "0-3"}},
		{desc: "empty checkpoint", save: NewCheckpoint(started), want: map[string]string{}},
		{
			desc: "replaces an older, longer checkpoint",
			setup: func(t *testing.T, path string) {
				old := full()
				old.RememberCPUSet("b", "4-7")
				old.RememberCPUSet("c", "8-11")
				if err := old.Save(path); err != nil {
					t.Fatal(err)
				}
			},
			save: full(), want: map[string]string{"a": "0-3"},
		},
		{
			desc: "replaces a corrupt checkpoint",
			setup: func(t *testing.T, path string) {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(`{"version": 1, "cpus`), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			save: full(), want: map[string]string{"a": "0-3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state", "isolate")
			path := filepath.Join(dir, "checkpoint.json")
			if tt.setup != nil {
				tt.setup(t, path)
			}
			if err := tt.save.Save(path); err != nil {
				t.Fatal(err)
			}
			got, err := LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.CPUSets) != len(tt.want) {
				t.Errorf("cpusets %v, want %v", got.CPUSets, tt.want)
			}
			for k, v := range tt.want {
				if got.CPUSets[k] != v {
					t.Errorf("cpuset of %s %q, want %q", k, got.CPUSets[k], v)
				}
			}
			if !got.Started.Equal(started) || got.Checksum != tt.save.Checksum {
				t.Errorf("read back %+v, saved %+v", got, tt.save)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o644 {
				t.Errorf("perm %v, want 0644", st.Mode().Perm())
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("checkpoint directory holds %q, want only checkpoint.json (temp file left?)", names)
			}
		})
	}
}

func TestCheckpointSaveFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	// A directory where the checkpoint should go: the save must fail,
	// name the path and leave nothing behind.
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err := NewCheckpoint(time.Now()).Save(path)
	if err == nil {
		t.Fatal("save over a directory succeeded")
	}
	if want := "save checkpoint: replace " + path; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries after the failed save, want 1", len(ents))
	}
}

func TestCheckpointLoadMissing(t *testing.T) {
	cp, err := LoadCheckpoint(filepath.Join(t.TempDir(), "none.json"))
	if cp != nil || err != nil {
		t.Errorf("missing checkpoint: %v, %v; want nil, nil", cp, err)
	}
}
