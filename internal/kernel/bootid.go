package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BootID reads <proc>/sys/kernel/random/boot_id, the kernel's id of this
// boot: two hosts of a plan with one boot id are one kernel (namespaces of
// one machine), not two machines.
func BootID(procRoot string) (string, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/random/boot_id"))
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("%s: empty", filepath.Join(procRoot, "sys/kernel/random/boot_id"))
	}
	return id, nil
}
