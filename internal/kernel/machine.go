package kernel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUModel reads the first processor's model name from <proc>/cpuinfo.
func CPUModel(procRoot string) (string, error) {
	f, err := os.Open(filepath.Join(procRoot, "cpuinfo"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	return ParseCPUModel(f)
}

// ParseCPUModel finds the model of a cpuinfo listing: "model name" on x86,
// else what other architectures call it ("Model" on arm64 boards,
// "cpu model" on MIPS, "cpu" on POWER); "" when it names none.
func ParseCPUModel(r io.Reader) (string, error) {
	found := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := found[k]; !seen && v != "" {
			found[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read cpuinfo: %w", err)
	}
	for _, k := range []string{"model name", "Model", "cpu model", "cpu"} {
		if v := found[k]; v != "" {
			return v, nil
		}
	}
	return "", nil
}

// MemTotal reads the machine's memory in bytes from <proc>/meminfo.
func MemTotal(procRoot string) (uint64, error) {
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return ParseMemTotal(f)
}

// ParseMemTotal reads the MemTotal line of a meminfo listing ("MemTotal:
// 16314452 kB") in bytes.
func ParseMemTotal(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo MemTotal %q: %w", v, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo has no MemTotal line")
}
