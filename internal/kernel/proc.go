package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ProcStartTime is when process pid started, in clock ticks after boot
// (field 22 of <procRoot>/<pid>/stat). With the pid it names one process
// for the life of the machine: a reused pid has another start time.
func ProcStartTime(procRoot string, pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("start time of pid %d: not a process id", pid)
	}
	p := filepath.Join(procRoot, strconv.Itoa(pid), "stat")
	f, err := os.Open(p)
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d: %w", pid, err)
	}
	defer f.Close()
	t, err := parseStatStartTime(f)
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d from %s: %w", pid, p, err)
	}
	return t, nil
}

// parseStatStartTime reads the starttime field of a /proc/PID/stat line:
// the 20th field after the parenthesised command name, which may itself
// hold spaces and ')'.
func parseStatStartTime(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(f) <= idx {
		return 0, fmt.Errorf("%d fields after the command name, want at least %d", len(f), idx+1)
	}
	t, err := strconv.ParseUint(f[idx], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("starttime %q: %w", f[idx], err)
	}
	return t, nil
}
