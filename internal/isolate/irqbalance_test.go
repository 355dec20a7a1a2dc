package isolate

import (
	"path/filepath"
	"testing"

	"ctrperf/internal/kernel"
)

func TestIrqbalancePID(t *testing.T) {
	tests := []struct {
		desc  string
		comms map[string]string // <proc>/<entry>/comm; nil: no proc root at all
		want  int
	}{
		{
			desc:  "running, among other processes and proc's own entries",
			comms: map[string]string{"1": "systemd\n", "812": "irqbalance\n", "self": "irqbalance\n", "irq": ""},
			want:  812,
		},
		{
			desc:  "not running: a longer name is another program",
			comms: map[string]string{"1": "systemd\n", "90": "irqbalance-ui\n"},
			want:  0,
		},
		{desc: "a process gone between the walk and its comm", comms: map[string]string{"7": ""}, want: 0},
		{desc: "no proc root", comms: nil, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			proc := filepath.Join(t.TempDir(), "proc")
			for entry, comm := range tt.comms {
				if comm == "" {
					writeFile(t, filepath.Join(proc, entry, "stat"), "") // a directory without comm
					continue
				}
				writeFile(t, filepath.Join(proc, entry, "comm"), comm)
			}
			if got := IrqbalancePID(kernel.NewFS(kernel.Roots{Proc: proc})); got != tt.want {
				t.Errorf("IrqbalancePID = %d, want %d", got, tt.want)
			}
		})
	}
}
