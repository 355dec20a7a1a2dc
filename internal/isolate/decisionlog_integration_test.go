package isolate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRefusesUnsafeDecisionLogDocker: root appends the decision log
// (OUT/isolate/RUN.decisions.jsonl in a bench run) only to a file of its
// own in a directory nobody else can change: a symlink planted at the
// log's name, or a world-writable log directory, stops Start with an error
// naming the path, and nothing outside is written.
func TestStartRefusesUnsafeDecisionLogDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	tests := []struct {
		desc  string
		setup func(t *testing.T, logDir, outside string) (refuse string)
	}{
		{"a symlink at the log's name", func(t *testing.T, logDir, outside string) string {
			p := filepath.Join(logDir, "r.decisions.jsonl")
			if err := os.Symlink(filepath.Join(outside, "victim"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"a dangling symlink at the log's name", func(t *testing.T, logDir, outside string) string {
			p := filepath.Join(logDir, "r.decisions.jsonl")
			if err := os.Symlink(filepath.Join(outside, "created"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"a world-writable log directory", func(t *testing.T, logDir, outside string) string {
			if err := os.Chmod(logDir, 0o777); err != nil {
				t.Fatal(err)
			}
			return logDir
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			logDir, outside := filepath.Join(root, "isolate"), filepath.Join(root, "outside")
			for _, d := range []string{logDir, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("victim\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			refuse := tt.setup(t, logDir, outside)
			r, err := Start(context.Background(), cli, Options{
				StateDir: filepath.Join(root, "state"), SteeringDir: filepath.Join(root, "steering"),
				LogPath: filepath.Join(logDir, "r.decisions.jsonl"),
				Labels:  []string{"ctrperf.run=no-such-run"}, DryRun: true,
			})
			if err == nil {
				_ = r.Stop(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), "refusing "+refuse+":") {
				t.Errorf("Start: %v, want a refusal naming %s", err, refuse)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "victim\n" {
				t.Errorf("the file outside was written: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(outside, "created")); !os.IsNotExist(err) {
				t.Errorf("a file was created outside through the link (%v)", err)
			}
		})
	}
}
