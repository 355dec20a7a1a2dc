package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A user's Dockerfile context, built locally the way `docker build` would,
// but never pulling: every FROM must already be on the engine (or be
// scratch). The image is named by the content of the context, so a context
// that did not change is never rebuilt, and a changed one gets a new tag
// next to the old one (`ctrperf images rm NAME` removes them all).

// Dir is a Dockerfile context directory to build.
type Dir struct {
	Name       string // short name: the LabelName label ("app-hello")
	Ref        string // reference to tag, e.g. DirRef(name, hash)
	Path       string // the context directory
	Dockerfile string // path of the Dockerfile inside Path; "" is "Dockerfile"
	// Content, when set, is the content hash the caller named the image
	// after; a context that no longer hashes to it is refused.
	Content string
}

// DirRef is the reference of a context image: ctrperf/NAME:HASH, HASH the
// context's content hash (ContextHash).
func DirRef(name, contentHash string) string { return "ctrperf/" + name + ":" + contentHash }

// maxContext bounds the context ctrperf sends to the builder.
const maxContext = 1 << 30

// contextFile is one entry of a build context.
type contextFile struct {
	rel  string // slash-separated path inside the context
	info fs.FileInfo
	link string // symlink target
}

// ContextHash reads a Dockerfile context (files excluded by its
// .dockerignore left out) and returns the hash of what would be sent to the
// builder: paths, modes, symlink targets and contents. It fails when the
// directory or its Dockerfile is missing.
func ContextHash(dir, dockerfile string) (string, error) {
	files, err := contextFiles(dir, dockerfile)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "ctrperf-context/%s\ndockerfile=%s\n", recipeVersion, dockerfileName(dockerfile))
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s\n%o\n", len(f.rel), f.rel, f.info.Mode())
		switch {
		case f.info.Mode()&fs.ModeSymlink != 0:
			fmt.Fprintf(h, "link=%s\n", f.link)
		case f.info.Mode().IsRegular():
			fd, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.rel)))
			if err != nil {
				return "", fmt.Errorf("build context %s: %w", dir, err)
			}
			fmt.Fprintf(h, "%d\n", f.info.Size())
			_, err = io.Copy(h, fd)
			fd.Close()
			if err != nil {
				return "", fmt.Errorf("build context %s: read %s: %w", dir, f.rel, err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func dockerfileName(dockerfile string) string {
	if dockerfile == "" {
		return "Dockerfile"
	}
	return filepath.ToSlash(filepath.Clean(dockerfile))
}

// contextFiles lists the context in path order, without what .dockerignore
// excludes (the Dockerfile and .dockerignore are always sent, as docker
// build does).
func contextFiles(dir, dockerfile string) ([]contextFile, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("build context %s is not a directory", dir)
	}
	df := dockerfileName(dockerfile)
	if strings.HasPrefix(df, "../") || path.IsAbs(df) {
		return nil, fmt.Errorf("build context %s: dockerfile %q must be inside the context", dir, dockerfile)
	}
	if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(df))); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("build context %s has no %s (the file `docker build` reads)", dir, df)
	}
	ign, err := readIgnore(filepath.Join(dir, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	var out []contextFile
	var total int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != df && rel != ".dockerignore" && ign.excluded(rel) {
			if d.IsDir() && !ign.hasExceptions() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := contextFile{rel: rel, info: info}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if f.link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			total += info.Size()
			if total > maxContext {
				return fmt.Errorf("more than %d MiB; exclude what the image does not need in .dockerignore", maxContext>>20)
			}
		case info.IsDir():
		default:
			return nil // sockets, devices, pipes: docker build skips them too
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", dir, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// ignore is a .dockerignore: patterns of filepath.Match matched against a
// path and each of its parent directories, "!" re-including, the last
// matching line winning. ("**" is not supported.)
type ignore struct {
	patterns []ignorePattern
}

type ignorePattern struct {
	glob   string
	negate bool
}

func readIgnore(file string) (ignore, error) {
	var ig ignore
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return ig, nil
	}
	if err != nil {
		return ig, fmt.Errorf("build context: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if strings.HasPrefix(line, "!") {
			p.negate, line = true, strings.TrimSpace(line[1:])
		}
		line = strings.Trim(path.Clean(filepath.ToSlash(line)), "/")
		if _, err := path.Match(line, ""); err != nil {
			return ig, fmt.Errorf("%s:%d: pattern %q: %w", file, n, line, err)
		}
		p.glob = line
		ig.patterns = append(ig.patterns, p)
	}
	return ig, nil
}

func (ig ignore) hasExceptions() bool {
	for _, p := range ig.patterns {
		if p.negate {
			return true
		}
	}
	return false
}

func (ig ignore) excluded(rel string) bool {
	out := false
	for _, p := range ig.patterns {
		for q := rel; q != "." && q != ""; q = path.Dir(q) {
			if ok, _ := path.Match(p.glob, q); ok {
				out = !p.negate
				break
			}
		}
	}
	return out
}

// contextTar writes the context as the tar stream the builder reads.
func contextTar(dir string, files []contextFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr, err := tar.FileInfoHeader(f.info, f.link)
		if err != nil {
			return nil, err
		}
		hdr.Name = f.rel
		if f.info.IsDir() {
			hdr.Name += "/"
		}
		// Owners and times of the user's checkout must not make two
		// identical contexts differ.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if f.info.Mode().IsRegular() {
			fd, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.rel)))
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, fd)
			fd.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Parents returns the images a Dockerfile builds FROM, in order, without
// scratch, earlier stages (FROM x AS name ... FROM name) and references
// with build arguments in them (the builder resolves those).
func Parents(dockerfile []byte) []string {
	var out []string
	stages := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		args := f[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:]
		}
		if len(args) == 0 {
			continue
		}
		ref := args[0]
		skip := ref == Scratch || strings.Contains(ref, "$") || stages[strings.ToLower(ref)]
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
		if skip {
			continue
		}
		out = append(out, ref)
	}
	return out
}

// BuildDir builds a Dockerfile context unless the engine already has d.Ref
// built from the same content on the same parent images. Every FROM must
// already exist on the engine: a missing one is an error that says how to
// get it there, never a pull. A failing build's error ends with the last
// lines of the builder's output.
func BuildDir(ctx context.Context, api API, d Dir, opts ...Option) (Result, error) {
	o := buildOptions(opts)
	res := Result{Name: d.Name, Ref: d.Ref}
	files, err := contextFiles(d.Path, d.Dockerfile)
	if err != nil {
		return res, err
	}
	content, err := ContextHash(d.Path, d.Dockerfile)
	if err != nil {
		return res, err
	}
	if d.Content != "" && content != d.Content {
		return res, fmt.Errorf("image %s: the build context %s changed since the plan was read (content %s, now %s): the runs of one plan must measure one program; start the plan again", d.Ref, d.Path, d.Content, content)
	}
	df, err := os.ReadFile(filepath.Join(d.Path, filepath.FromSlash(dockerfileName(d.Dockerfile))))
	if err != nil {
		return res, fmt.Errorf("build context %s: %w", d.Path, err)
	}
	var h hasher
	h.add("kind", "context")
	h.add("content", content)
	for _, p := range Parents(df) {
		img, _, found, err := existing(ctx, api, p)
		if err != nil {
			return res, fmt.Errorf("image %s: %w", d.Ref, err)
		}
		if !found {
			return res, fmt.Errorf("image %s: %s builds FROM %s, which is not on this engine, and ctrperf never pulls: `docker load -i FILE.tar` it (saved elsewhere with `docker save`), or build it first: %w",
				d.Ref, filepath.Join(d.Path, dockerfileName(d.Dockerfile)), p, ErrMissing)
		}
		h.add("from", p+"@"+img.ID)
	}
	res.Hash = h.sum()
	return buildUnlessCached(ctx, api, res, o, func() error {
		fmt.Fprintf(o.progress, "building %s from %s\n", d.Ref, d.Path)
		tarCtx, err := contextTar(d.Path, files)
		if err != nil {
			return fmt.Errorf("image %s: build context %s: %w", d.Ref, d.Path, err)
		}
		tail := &tailWriter{max: 20}
		if err := runBuildFile(ctx, api, tarCtx, dockerfileName(d.Dockerfile), d.Ref, imageLabels(d.Name, res.Hash, o.labels), io.MultiWriter(o.progress, tail)); err != nil {
			return fmt.Errorf("%w%s", err, tail.String())
		}
		return nil
	})
}

// tailWriter keeps the last lines written to it.
type tailWriter struct {
	max     int
	lines   []string
	partial string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	s := t.partial + string(p)
	parts := strings.Split(s, "\n")
	t.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		t.lines = append(t.lines, l)
		if len(t.lines) > t.max {
			t.lines = t.lines[1:]
		}
	}
	return len(p), nil
}

// String is the tail formatted to end an error message.
func (t *tailWriter) String() string {
	lines := t.lines
	if strings.TrimSpace(t.partial) != "" {
		lines = append(lines, t.partial)
	}
	if len(lines) == 0 {
		return ""
	}
	return "; last build output:\n" + strings.Join(lines, "\n")
}
