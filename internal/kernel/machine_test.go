package kernel

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestMachineFacts(t *testing.T) {
	root := filepath.Join("testdata", "machine", "proc")
	m, err := CPUModel(root)
	if err != nil || m != "AMD EPYC 7B13 64-Core Processor" {
		t.Errorf("CPUModel = %q, %v", m, err)
	}
	mem, err := MemTotal(root)
	if err != nil || mem != 24684096*1024 {
		t.Errorf("MemTotal = %d, %v", mem, err)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
	if m, _ := ParseCPUModel(strings.NewReader(arm)); m != "Raspberry Pi 4 Model B Rev 1.4" {
		t.Errorf("arm64 model = %q", m)
	}
	if _, err := ParseMemTotal(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("meminfo without MemTotal: no error")
	}
}
