package kernel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Point  string // mount point, unescaped
	FSType string
	Source string // unescaped
	// Options are the mount's own (rw, noatime, relatime); SuperOptions
	// the filesystem's (data=writeback, discard, logbufs=8).
	Options      []string
	SuperOptions []string
}

// Mounts reads the mount table of the reading process under procRoot.
func Mounts(procRoot string) ([]Mount, error) {
	p := SelfMountinfo(procRoot)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	m, err := ParseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return m, nil
}

// ParseMountinfo reads the format of proc(5): fields up to the optional
// ones, a "-" separator, then fstype and source.
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("line %d: malformed mountinfo entry %q", n, sc.Text())
		}
		m := Mount{Point: unescapeOctal(f[4]), FSType: f[sep+1], Source: unescapeOctal(f[sep+2])}
		if len(f) > 5 {
			m.Options = strings.Split(f[5], ",")
		}
		if sep+3 < len(f) {
			m.SuperOptions = strings.Split(f[sep+3], ",")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeOctal undoes the kernel's \040-style escaping of spaces and tabs.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// PathUnder reports whether p is dir or below it.
func PathUnder(p, dir string) bool {
	dir = filepath.Clean(dir)
	p = filepath.Clean(p)
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// IsMountPoint reports whether dir is a mount point in mounts.
func IsMountPoint(mounts []Mount, dir string) bool {
	for _, m := range mounts {
		if m.Point == dir {
			return true
		}
	}
	return false
}

// MountsUnder returns the mount points at or below any of dirs, deepest
// first, which is the order they can be unmounted in.
func MountsUnder(mounts []Mount, dirs ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		for _, d := range dirs {
			if d != "" && PathUnder(m.Point, d) && !seen[m.Point] {
				seen[m.Point] = true
				out = append(out, m.Point)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out
}
