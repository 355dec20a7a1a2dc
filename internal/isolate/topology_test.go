package isolate

import (
	"fmt"
	"path/filepath"
	"testing"

	"ctrperf/internal/kernel"
)

func TestDiscoverTopology(t *testing.T) {
	tests := []struct {
		desc string
		// files under the sys root, relative to devices/system/cpu.
		files     map[string]string
		wantCores string // the cores, each a CPU list
		wantErr   bool
	}{
		{
			desc:      "2 cores × 2 threads, Intel numbering",
			files:     cpuTopologyFiles("0-3", 0, 1, 0, 1),
			wantCores: "[0,2 1,3]",
		},
		{
			desc:      "no core ids: every CPU its own core",
			files:     map[string]string{"online": "0-1\n"},
			wantCores: "[0 1]",
		},
		{desc: "no sysfs under the root", files: nil, wantErr: true},
		{desc: "unparsable online list", files: map[string]string{"online": "zz\n"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			sys := t.TempDir()
			for rel, s := range tt.files {
				writeFile(t, filepath.Join(sys, "devices", "system", "cpu", rel), s)
			}
			top, err := DiscoverTopology(kernel.NewFS(kernel.Roots{Sys: sys}))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("topology %v, want an error", top.CPUs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(top.Cores()); got != tt.wantCores {
				t.Errorf("cores %s, want %s", got, tt.wantCores)
			}
		})
	}
	// This machine's real /sys parses too.
	if _, err := DiscoverTopology(kernel.DefaultFS()); err != nil {
		t.Logf("real /sys: %v", err)
	}
}

// cpuTopologyFiles is a devices/system/cpu tree: the online list and each
// online CPU's core id, all on socket 0.
func cpuTopologyFiles(online string, cores ...int) map[string]string {
	files := map[string]string{"online": online + "\n"}
	for i, core := range cores {
		files[fmt.Sprintf("cpu%d/topology/core_id", i)] = fmt.Sprintf("%d\n", core)
		files[fmt.Sprintf("cpu%d/topology/physical_package_id", i)] = "0\n"
	}
	return files
}
