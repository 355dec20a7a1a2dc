package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// GoImage is a FROM-scratch image holding one static Go program of this
// module as its entrypoint, built from source with `go build`: for tests
// and development, since it needs the source tree and a Go toolchain. The
// images ctrperf ships are Program images of the ctrperf binary itself.
type GoImage struct {
	Name    string            // recipe name; default: the package's last path element
	Ref     string            // e.g. "ctrperf/ticketd:latest"
	Package string            // package to build, relative to the module root ("./workloads/ticketd") or an import path
	Args    []string          // default arguments (CMD)
	Env     map[string]string // ENV
	// ModuleDir is the module root; "" finds it from the working directory
	// (`go env GOMOD`, else the nearest go.mod above).
	ModuleDir string
}

// Derived returns the derived-image recipe g is built as: the binary at
// /<name> on top of scratch.
func (g GoImage) Derived() Derived {
	name := g.name()
	bin := "/" + name
	return Derived{
		Name:       name,
		Ref:        g.Ref,
		From:       Scratch,
		Files:      map[string]File{bin: {Mode: 0o755, GoPackage: g.Package}},
		Env:        g.Env,
		Entrypoint: []string{bin},
		Cmd:        g.Args,
		ModuleDir:  g.ModuleDir,
	}
}

func (g GoImage) name() string {
	if g.Name != "" {
		return g.Name
	}
	return path.Base(strings.TrimSuffix(g.Package, "/"))
}

// BuildGo builds g with CGO_ENABLED=0 and -trimpath, so the binary (and with
// it the recipe hash) is the same for the same source: an unchanged program is
// not rebuilt.
func BuildGo(ctx context.Context, api API, g GoImage, opts ...Option) (Result, error) {
	if g.Package == "" {
		return Result{Name: g.Name, Ref: g.Ref}, fmt.Errorf("go image %q: Package is required", g.Ref)
	}
	return BuildFrom(ctx, api, g.Derived(), opts...)
}

// goBuild builds a static binary of pkg and returns its bytes.
func goBuild(ctx context.Context, moduleDir, pkg string) ([]byte, error) {
	if moduleDir == "" {
		var err error
		if moduleDir, err = ModuleRoot(ctx); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "ctrperf-gobuild-")
	if err != nil {
		return nil, fmt.Errorf("go build %s: %w", pkg, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	// -s -w and an empty build id keep the binary small and make its bytes
	// depend only on the source and the toolchain.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s in %s: %w: %s", pkg, moduleDir, err, strings.TrimSpace(stderr.String()))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("go build %s: read binary: %w", pkg, err)
	}
	return bin, nil
}

// ModuleRoot returns the directory of the go.mod governing the working
// directory: what `go env GOMOD` says, or else the nearest go.mod above.
func ModuleRoot(ctx context.Context) (string, error) {
	if out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output(); err == nil {
		gomod := strings.TrimSpace(string(out))
		if gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	return findUp(wd, "go.mod")
}

// findUp walks from dir towards / and returns the first directory holding name.
func findUp(dir, name string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return d, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("find %s above %s: %w", name, dir, err)
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no %s in %s or any parent: run ctrperf from the repository (the module root)", name, dir)
		}
	}
}

func modeOf(m uint32) fs.FileMode { return fs.FileMode(m) }
