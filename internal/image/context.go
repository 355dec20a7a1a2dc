package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// File is one file placed into an image.
type File struct {
	Mode fs.FileMode // permission bits; 0 means 0644 (0755 for Self or a GoPackage)
	Data []byte
	// Self, when set, replaces Data with the ctrperf binary itself
	// (selfbin.Read: the running executable), so that its hidden commands
	// (`ctrperf __ticketd`) run in the image. FROM scratch, a binary built
	// with cgo brings its loader and libraries (selfbin.Runtime).
	Self bool
	// GoPackage, when set, replaces Data with the static binary built from
	// this package of the module by `go build` (tests and development only:
	// it needs the source tree and a Go toolchain; shipped recipes use Self).
	GoPackage string
}

// dockerfile is the generated Dockerfile of a build. Files come from the
// context's rootfs/ directory in one COPY, so one layer carries them all.
type dockerfile struct {
	From       string
	CopyRootfs bool
	Env        map[string]string
	Workdir    string
	User       string
	Entrypoint []string
	Cmd        []string
}

// contextRootfs is the directory of the build context whose content is
// copied to / in the image.
const contextRootfs = "rootfs"

func (d dockerfile) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", d.From)
	if d.CopyRootfs {
		fmt.Fprintf(&b, "COPY %s/ /\n", contextRootfs)
	}
	for _, k := range sortedKeys(d.Env) {
		// strconv.Quote's escapes (\" and \\) are what Dockerfile double
		// quotes understand; values with other control characters are
		// rejected by validateEnv.
		fmt.Fprintf(&b, "ENV %s=%s\n", k, strconv.Quote(d.Env[k]))
	}
	if d.Workdir != "" {
		fmt.Fprintf(&b, "WORKDIR %s\n", d.Workdir)
	}
	if d.User != "" {
		fmt.Fprintf(&b, "USER %s\n", d.User)
	}
	if d.Entrypoint != nil {
		fmt.Fprintf(&b, "ENTRYPOINT %s\n", execForm(d.Entrypoint))
	}
	if d.Cmd != nil {
		fmt.Fprintf(&b, "CMD %s\n", execForm(d.Cmd))
	}
	return b.String()
}

// execForm renders argv as the JSON array of a Dockerfile's exec form, so no
// shell is needed in the image (there is none in a FROM-scratch image).
func execForm(argv []string) string {
	b, _ := json.Marshal(argv) // []string always marshals
	return string(b)
}

func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "= \t\n\"'$") {
			return fmt.Errorf("environment variable name %q is not valid in a Dockerfile", k)
		}
		if strings.ContainsAny(v, "\n\r") {
			return fmt.Errorf("environment variable %s: value must be one line", k)
		}
	}
	return nil
}

// imagePath checks that p is an absolute, clean path inside the image and
// returns it relative to "/".
func imagePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return "", fmt.Errorf("image file path %q must be absolute and clean", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// buildContext writes the tar stream of a build context: the Dockerfile and
// files (already resolved to data) under rootfs/. Entries are written in
// order with a fixed time, so the same inputs give the same bytes.
func buildContext(df dockerfile, files map[string]File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	writeDir := func(name string) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: epoch})
	}
	text := []byte(df.String())
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "Dockerfile", Mode: 0o644, Size: int64(len(text)), ModTime: epoch}); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	if _, err := tw.Write(text); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	if len(files) > 0 {
		if err := writeDir(contextRootfs); err != nil {
			return nil, fmt.Errorf("write build context: %w", err)
		}
	}
	for _, p := range sortedKeys(files) {
		rel, err := imagePath(p)
		if err != nil {
			return nil, err
		}
		// Parent directories first, so COPY creates them 0755.
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			if err := writeDir(contextRootfs + "/" + strings.Join(parts[:i], "/")); err != nil {
				return nil, fmt.Errorf("write build context dir for %s: %w", p, err)
			}
		}
		f := files[p]
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: contextRootfs + "/" + rel, Mode: int64(mode), Size: int64(len(f.Data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write build context file %s: %w", p, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("write build context file %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	return buf.Bytes(), nil
}
