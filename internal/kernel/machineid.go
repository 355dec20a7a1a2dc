package kernel

import (
	"os"
	"strings"
)

// MachineIDFiles are where a machine's id is kept (systemd's, then
// D-Bus's older place).
var MachineIDFiles = []string{"/etc/machine-id", "/var/lib/dbus/machine-id"}

// MachineID is the first non-empty id of files (MachineIDFiles when none
// are given): it tells apart two machines that share a hostname, and
// stays across reboots. "" when the machine has none (a bare container).
func MachineID(files ...string) string {
	if len(files) == 0 {
		files = MachineIDFiles
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				return id
			}
		}
	}
	return ""
}
