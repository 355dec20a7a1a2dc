package image

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// aptSource is one "deb" entry of apt's sources.
type aptSource struct {
	URI        string
	Suites     []string
	Components []string
}

// AptSources reads the "deb" entries of apt's sources below root
// (root/etc/apt/sources.list, then sources.list.d/*.list and *.sources in
// name order). Files named otherwise (e.g. *.disabled) are ignored, as apt
// ignores them.
func aptSources(root string) ([]aptSource, error) {
	dir := filepath.Join(root, "etc", "apt")
	paths := []string{filepath.Join(dir, "sources.list")}
	entries, err := os.ReadDir(filepath.Join(dir, "sources.list.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	var extra []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
			extra = append(extra, filepath.Join(dir, "sources.list.d", n))
		}
	}
	sort.Strings(extra)
	var out []aptSource
	for _, p := range append(paths, extra...) {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		var src []aptSource
		if strings.HasSuffix(p, ".sources") {
			src, err = parseDeb822Sources(f)
		} else {
			src, err = parseOneLineSources(f)
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("parse apt sources %s: %w", p, err)
		}
		out = append(out, src...)
	}
	return out, nil
}

// parseOneLineSources parses the one-line format:
// "deb [opt=val ...] URI suite [component ...]".
func parseOneLineSources(r io.Reader) ([]aptSource, error) {
	var out []aptSource
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if i := strings.IndexByte(line, '['); i >= 0 {
			j := strings.IndexByte(line[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ in %q", sc.Text())
			}
			line = line[:i] + line[i+j+1:]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		out = append(out, aptSource{URI: f[1], Suites: []string{f[2]}, Components: f[3:]})
	}
	return out, sc.Err()
}

// parseDeb822Sources parses the deb822 format of *.sources files: paragraphs
// of "Field: value" separated by blank lines.
func parseDeb822Sources(r io.Reader) ([]aptSource, error) {
	var out []aptSource
	para := map[string]string{}
	flush := func() {
		defer func() { para = map[string]string{} }()
		if strings.EqualFold(para["enabled"], "no") {
			return
		}
		if !slices.Contains(strings.Fields(para["types"]), "deb") {
			return
		}
		for _, uri := range strings.Fields(para["uris"]) {
			out = append(out, aptSource{URI: uri, Suites: strings.Fields(para["suites"]), Components: strings.Fields(para["components"])})
		}
	}
	last := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t': // continuation of the last field
			if last != "" {
				para[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("line %q is neither a field nor a continuation", line)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			para[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out, sc.Err()
}

// debianMirror picks the mirror that serves suite itself (not suite-updates
// or suite-security) from apt's sources.
func debianMirror(sources []aptSource, suite string) (string, error) {
	for _, s := range sources {
		if slices.Contains(s.Suites, suite) {
			return strings.TrimSuffix(s.URI, "/"), nil
		}
	}
	return "", fmt.Errorf("apt's sources name no mirror for the Debian suite %q", suite)
}
