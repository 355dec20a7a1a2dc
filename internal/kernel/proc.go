package kernel

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// ProcAlive says whether process pid exists under procRoot and is not a
// zombie (or dead) waiting to be reaped: the state in <pid>/stat, the field
// after the parenthesised command name, which may hold spaces and ')'.
func ProcAlive(procRoot string, pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	return parseStatAlive(b)
}

// parseStatAlive reads the state of a /proc/PID/stat line; a line it
// cannot read counts as alive.
func parseStatAlive(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}
