package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestContextHashFollowsWhatIsSent(t *testing.T) {
	dir := writeContext(t, map[string]string{
		"Dockerfile":    "FROM scratch\nCOPY app /app\n",
		"app":           "v1",
		"notes/big.log": "ignored",
		".dockerignore": "# logs stay out\nnotes\n*.tmp\n",
	})
	h1, err := ContextHash(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	// Ignored files do not count; sent ones do.
	if err := os.WriteFile(filepath.Join(dir, "notes", "big.log"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.tmp"), []byte("scratch"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := ContextHash(dir, ""); h != h1 {
		t.Errorf("an ignored file changed the hash")
	}
	if err := os.WriteFile(filepath.Join(dir, "app"), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := ContextHash(dir, ""); h == h1 {
		t.Errorf("a changed file kept the hash")
	}
	files, err := contextFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.rel)
	}
	if want := []string{".dockerignore", "Dockerfile", "app"}; !slices.Equal(names, want) {
		t.Errorf("context %v, want %v", names, want)
	}

	if _, err := ContextHash(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "has no Dockerfile") {
		t.Errorf("no Dockerfile: %v", err)
	}
	if _, err := ContextHash(filepath.Join(dir, "nope"), ""); err == nil {
		t.Error("a missing directory hashed")
	}
}

func TestIgnoreExceptions(t *testing.T) {
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM scratch\n", "bin/app": "x", "bin/other": "y", "src/a.go": "z",
		".dockerignore": "*\n!bin/app\n"})
	files, err := contextFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.rel)
	}
	if want := []string{".dockerignore", "Dockerfile", "bin/app"}; !slices.Equal(names, want) {
		t.Errorf("context %v, want %v", names, want)
	}
}

func TestParents(t *testing.T) {
	df := `# comment
ARG BASE=x
FROM --platform=linux/amd64 golang:1.22 AS build
RUN true
FROM build AS test
FROM scratch
FROM ctrperf/debian-base:latest
COPY --from=build /x /x
FROM $BASE
`
	if got, want := Parents([]byte(df)), []string{"golang:1.22", "ctrperf/debian-base:latest"}; !slices.Equal(got, want) {
		t.Errorf("Parents = %v, want %v", got, want)
	}
}

func TestBuildDir(t *testing.T) {
	ctx := context.Background()
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM base:1\nCOPY app /app\n", "app": "v1"})
	f := newFakeEngine()
	hash, err := ContextHash(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	d := Dir{Name: "app-x", Ref: DirRef("app-x", hash), Path: dir}

	// A FROM that is not on the engine is never pulled.
	_, err = BuildDir(ctx, f, d)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "FROM base:1") || !strings.Contains(err.Error(), "docker load") || len(f.builds) != 0 {
		t.Fatalf("missing parent: %v (builds %d)", err, len(f.builds))
	}
	f.add(nil, "base:1")
	res, err := BuildDir(ctx, f, d)
	if err != nil || res.Action != ActionBuilt || len(f.builds) != 1 {
		t.Fatalf("build: %+v %v", res, err)
	}
	b := f.builds[0]
	if b.Labels[LabelManaged] != "true" || b.Labels[LabelName] != "app-x" || b.Labels[LabelRecipe] != res.Hash || b.Files["app"] == 0 {
		t.Errorf("build %+v", b)
	}
	// Built once: the same context on the same parent is cached.
	if res2, err := BuildDir(ctx, f, d); err != nil || res2.Action != ActionCached || len(f.builds) != 1 {
		t.Errorf("second build: %+v %v", res2, err)
	}
	// A rebuilt parent makes it stale.
	f.add(nil, "base:1")
	if res3, err := BuildDir(ctx, f, d); err != nil || res3.Action != ActionBuilt {
		t.Errorf("after the parent changed: %+v %v", res3, err)
	}
	// A context that changed since its image was named is refused.
	if _, err := BuildDir(ctx, f, Dir{Name: "app-x", Ref: d.Ref, Path: dir, Content: "0123456789abcdef"}); err == nil || !strings.Contains(err.Error(), "changed since the plan was read") {
		t.Errorf("changed context: %v", err)
	}
	// A failing step: the error ends with the builder's last lines.
	f.buildErr = "The command '/bin/sh -c make' returned a non-zero code: 2"
	_, err = BuildDir(ctx, f, d, WithForce())
	if err == nil || !strings.Contains(err.Error(), "non-zero code: 2") || !strings.Contains(err.Error(), "last build output:\nStep 1/3") {
		t.Errorf("failing build: %v", err)
	}
}
