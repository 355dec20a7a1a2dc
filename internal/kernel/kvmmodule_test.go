package kernel

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKVMModule(t *testing.T) {
	cases := []struct {
		desc    string
		modules []string
		want    string
	}{
		{"no KVM module", []string{"ext4", "kvm"}, ""},
		{"hardware, Intel", []string{"kvm", "kvm_intel"}, "kvm_intel"},
		{"hardware, AMD", []string{"kvm", "kvm_amd"}, "kvm_amd"},
		{"PVM", []string{"kvm", "kvm_pvm"}, "kvm_pvm"},
		{"hardware wins over PVM", []string{"kvm_pvm", "kvm_amd"}, "kvm_amd"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			sys := t.TempDir()
			for _, m := range c.modules {
				if err := os.MkdirAll(filepath.Join(sys, "module", m, "parameters"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if got := KVMModule(sys); got != c.want {
				t.Errorf("KVMModule = %q, want %q", got, c.want)
			}
		})
	}
	// A file of that name is no module directory.
	sys := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "module"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "module", "kvm_intel"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := KVMModule(sys); got != "" {
		t.Errorf("KVMModule with a plain file = %q, want \"\"", got)
	}
}
