package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Memory sizes as Docker writes them (docker run -m): a number with an
// optional binary unit k, m, g, t, p or e (case-insensitive, an optional "b"
// or "ib" after it), or a plain number of bytes.

var binaryUnits = map[byte]float64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40, 'p': 1 << 50, 'e': 1 << 60}

// ParseMemory reads a size like "512m", "1.5g", "64MiB" or "1048576".
func ParseMemory(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.LastIndexAny(t, "0123456789.")
	if i < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	num, unit := t[:i+1], strings.ToLower(strings.TrimSpace(t[i+1:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	switch {
	case unit == "" || unit == "b":
	case len(unit) <= 3 && binaryUnits[unit[0]] != 0 && (len(unit) == 1 || unit[1:] == "b" || unit[1:] == "ib"):
		v *= binaryUnits[unit[0]]
	default:
		return 0, fmt.Errorf("invalid size %q: unknown unit %q", s, unit)
	}
	switch {
	case v > math.MaxInt64:
		// int64(v) of a larger float is undefined (negative on amd64).
		return 0, fmt.Errorf("invalid size %q: larger than %s", s, FormatMemory(math.MaxInt64))
	case v == math.MaxInt64:
		// float64(MaxInt64) is 2^63 ("8EiB", what FormatMemory writes
		// for the largest sizes): the largest int64 stands for it.
		return math.MaxInt64, nil
	}
	return int64(v), nil
}

// FormatMemory writes a size in bytes with a binary unit and at most four
// significant digits ("512MiB", "1.5GiB").
func FormatMemory(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.4g%s", v, units[i])
}
