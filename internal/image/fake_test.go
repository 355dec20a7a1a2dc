package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeEngine is an in-memory image store: builds and imports add images,
// tags alias them. err, when set, fails every call.
type fakeEngine struct {
	mu       sync.Mutex
	images   map[string]*image.InspectResponse // ref -> image (tags share the pointer)
	byID     map[string]*image.InspectResponse // every image, untagged ones too
	builds   []fakeBuild
	imports  []string
	removed  []string
	inUse    map[string]bool // refs whose removal fails (a container uses them)
	nextID   int
	err      error
	buildErr string // a build step's failure, reported in the stream
}

type fakeBuild struct {
	Ref        string
	Labels     map[string]string
	Dockerfile string
	Files      map[string]int64 // context path -> mode
}

var _ API = (*fakeEngine)(nil)

func newFakeEngine() *fakeEngine {
	return &fakeEngine{images: map[string]*image.InspectResponse{}, byID: map[string]*image.InspectResponse{}, inUse: map[string]bool{}}
}

// add puts an image on the fake engine under refs.
func (f *fakeEngine) add(labels map[string]string, refs ...string) *image.InspectResponse {
	f.nextID++
	img := &image.InspectResponse{ID: fmt.Sprintf("sha256:%064d", f.nextID), RepoTags: refs, Size: int64(f.nextID) * 1000, Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: labels}}}
	for _, r := range refs {
		f.untag(r)
		f.images[r] = img
	}
	f.byID[img.ID] = img
	return img
}

// untag takes ref off the image it names, as a build or a tag that moves
// ref to another image does; the old image stays, reachable by its ID.
func (f *fakeEngine) untag(ref string) {
	old, ok := f.images[ref]
	if !ok {
		return
	}
	tags := old.RepoTags[:0:0]
	for _, t := range old.RepoTags {
		if t != ref {
			tags = append(tags, t)
		}
	}
	old.RepoTags = tags
	delete(f.images, ref)
}

func (f *fakeEngine) ImageBuild(_ context.Context, ctxTar io.Reader, o client.ImageBuildOptions) (client.ImageBuildResult, error) {
	if f.err != nil {
		return client.ImageBuildResult{}, f.err
	}
	b := fakeBuild{Ref: o.Tags[0], Labels: o.Labels, Files: map[string]int64{}}
	tr := tar.NewReader(ctxTar)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return client.ImageBuildResult{}, err
		}
		if h.Name == "Dockerfile" {
			df, _ := io.ReadAll(tr)
			b.Dockerfile = string(df)
			continue
		}
		b.Files[h.Name] = h.Mode
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, b)
	if f.buildErr != "" {
		return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(`{"stream":"Step 1/3"}` + "\n" + `{"errorDetail":{"message":"x"},"error":"` + f.buildErr + `"}`))}, nil
	}
	f.add(o.Labels, o.Tags...)
	return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(`{"stream":"Successfully built\n"}`))}, nil
}

func (f *fakeEngine) ImageImport(_ context.Context, src client.ImageImportSource, ref string, o client.ImageImportOptions) (client.ImageImportResult, error) {
	if f.err != nil {
		return nil, f.err
	}
	io.Copy(io.Discard, src.Source)
	labels := map[string]string{}
	for _, c := range o.Changes {
		if kv, ok := strings.CutPrefix(c, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports = append(f.imports, ref)
	f.add(labels, ref)
	return io.NopCloser(strings.NewReader(`{"status":"sha256:feed"}`)), nil
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	if f.err != nil {
		return client.ImageInspectResult{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[ref]; ok {
		return client.ImageInspectResult{InspectResponse: *img}, nil
	}
	if img, ok := f.byID[ref]; ok {
		return client.ImageInspectResult{InspectResponse: *img}, nil
	}
	return client.ImageInspectResult{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + ref)
}

func (f *fakeEngine) ImageList(_ context.Context, o client.ImageListOptions) (client.ImageListResult, error) {
	if f.err != nil {
		return client.ImageListResult{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []image.Summary
	for _, ref := range sortedKeys(f.images) {
		img := f.images[ref]
		if seen[img.ID] || img.Config.Labels[LabelManaged] != "true" {
			continue
		}
		seen[img.ID] = true
		var tags []string
		for _, r := range sortedKeys(f.images) {
			if f.images[r] == img {
				tags = append(tags, r)
			}
		}
		out = append(out, image.Summary{ID: img.ID, RepoTags: tags, Labels: img.Config.Labels, Size: img.Size, Created: 1700000000})
	}
	return client.ImageListResult{Items: out}, nil
}

func (f *fakeEngine) ImageRemove(_ context.Context, ref string, _ client.ImageRemoveOptions) (client.ImageRemoveResult, error) {
	if f.err != nil {
		return client.ImageRemoveResult{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inUse[ref] {
		return client.ImageRemoveResult{}, cerrdefs.ErrConflict.WithMessage("image is being used by a container")
	}
	if img, ok := f.byID[ref]; ok {
		for _, t := range img.RepoTags {
			delete(f.images, t)
		}
		delete(f.byID, ref)
	} else if img, ok := f.images[ref]; ok {
		f.untag(ref)
		if len(img.RepoTags) == 0 {
			delete(f.byID, img.ID)
		}
	}
	f.removed = append(f.removed, ref)
	return client.ImageRemoveResult{Items: []image.DeleteResponse{{Untagged: ref}}}, nil
}

func (f *fakeEngine) ImageTag(_ context.Context, o client.ImageTagOptions) (client.ImageTagResult, error) {
	if f.err != nil {
		return client.ImageTagResult{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[o.Source]
	if !ok {
		return client.ImageTagResult{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + o.Source)
	}
	f.untag(o.Target)
	img.RepoTags = append(img.RepoTags, o.Target)
	f.images[o.Target] = img
	return client.ImageTagResult{}, nil
}

// mapEnv is a getenv over a map.
func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}
