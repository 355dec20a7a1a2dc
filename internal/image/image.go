// Package image builds the images ctrperf deploys, locally and without any
// registry, through the Docker Engine API (so the same code serves the user's
// engine and every private engine ctrperf starts):
//
//   - FROM-scratch images holding the static ctrperf binary itself, whose
//     entrypoint is one of its hidden commands (Program: the binary is
//     copied from the running executable, so no source tree and no Go
//     toolchain are needed; BuildGo builds a package from source instead,
//     for tests and development),
//   - the Debian base image with memcached, MariaDB, fio, sysbench and
//     stress-ng and bonnie++, made by debootstrap and imported as a rootfs tarball
//     (BuildBase), the tarball kept in a cache directory so another engine
//     imports it in seconds,
//   - images derived from another image by adding files (BuildFrom).
//
// Every image is labelled with the hash of its recipe; a build whose recipe
// hash matches the image already on the engine does nothing. Recipes are
// registered by name (Register) so that Ensure and `ctrperf images build` can
// make any of them exist on an engine. A user with images in a registry names
// them instead (CTRPERF_IMAGE_<NAME>); ctrperf then only checks they exist and
// never pulls.
package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"ctrperf/internal/labels"
)

// Labels carried by every image ctrperf builds. Images are a cache shared by
// runs, so they carry no run id; `ctrperf images rm` removes them.
const (
	LabelManaged = labels.Managed   // "true", the same label every ctrperf object carries
	LabelRecipe  = "ctrperf.recipe" // hash of the recipe the image was built from
	LabelName    = "ctrperf.image"  // the recipe's short name ("debian-base", "ticketd")
)

// recipeVersion is mixed into every recipe hash: bump it when the way images
// are assembled changes, so that every image is rebuilt once.
const recipeVersion = "1"

// API is the part of the Docker Engine client this package uses;
// client.APIClient (and so *client.Client) satisfies it.
type API interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, options client.ImageImportOptions) (client.ImageImportResult, error)
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageList(ctx context.Context, options client.ImageListOptions) (client.ImageListResult, error)
	ImageRemove(ctx context.Context, imageID string, options client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	ImageTag(ctx context.Context, options client.ImageTagOptions) (client.ImageTagResult, error)
}

var _ API = (client.APIClient)(nil)

// Result is what a build or an Ensure did.
type Result struct {
	Name   string `json:"name,omitempty"` // recipe name, when known
	Ref    string `json:"ref"`            // the reference to deploy
	ID     string `json:"id"`             // image ID on the engine
	Hash   string `json:"hash,omitempty"` // recipe hash ("" for an override)
	Action Action `json:"action"`
}

// Action says what a build had to do.
type Action string

const (
	ActionCached   Action = "cached"   // the image with this recipe hash was already there
	ActionBuilt    Action = "built"    // built (or debootstrapped) now
	ActionImported Action = "imported" // imported from the cached rootfs tarball
	ActionExternal Action = "external" // a user-named image that exists; nothing built
)

// Option changes how one build runs.
type Option func(*options)

type options struct {
	progress io.Writer
	force    bool
	labels   map[string]string
	cacheDir string
	aptRoot  string
}

// WithProgress sends progress lines to w (default: discarded).
func WithProgress(w io.Writer) Option { return func(o *options) { o.progress = w } }

// WithForce rebuilds even when an image with the recipe hash exists (and, for
// the base image, debootstraps again instead of importing the cached tarball).
func WithForce() Option { return func(o *options) { o.force = true } }

// WithLabels adds labels to the image (e.g. a test's ctrperf.run, so that the
// test removes only what it built). They do not enter the recipe hash.
func WithLabels(l map[string]string) Option { return func(o *options) { o.labels = l } }

// WithCacheDir sets the directory for the base image's rootfs tarball
// (default $CTRPERF_CACHE_DIR or /var/cache/ctrperf).
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// WithAptRoot reads the apt sources below root instead of "/" (tests).
func WithAptRoot(root string) Option { return func(o *options) { o.aptRoot = root } }

func buildOptions(opts []Option) options {
	o := options{progress: io.Discard, aptRoot: "/"}
	for _, f := range opts {
		f(&o)
	}
	if o.progress == nil {
		o.progress = io.Discard
	}
	return o
}

// imageLabels are the labels of a built image.
func imageLabels(name, hash string, extra map[string]string) map[string]string {
	l := map[string]string{}
	for k, v := range extra {
		l[k] = v
	}
	l[LabelManaged] = "true"
	l[LabelRecipe] = hash
	if name != "" {
		l[LabelName] = name
	}
	return l
}

// hasher builds a recipe hash from named parts, so that moving bytes from one
// part to the next changes the hash.
type hasher struct{ parts []string }

func (h *hasher) add(key, value string) { h.parts = append(h.parts, key+"="+value) }

func (h *hasher) addBytes(key string, b []byte) {
	s := sha256.Sum256(b)
	h.add(key, hex.EncodeToString(s[:]))
}

func (h *hasher) sum() string {
	s := sha256.New()
	fmt.Fprintf(s, "ctrperf-image-recipe/%s\n", recipeVersion)
	for _, p := range h.parts {
		fmt.Fprintf(s, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(s.Sum(nil))[:16]
}

// existing returns the image a ref names and its recipe hash, or found=false.
func existing(ctx context.Context, api API, ref string) (img image.InspectResponse, hash string, found bool, err error) {
	res, err := api.ImageInspect(ctx, ref)
	img = res.InspectResponse
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return img, "", false, nil
		}
		return img, "", false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if img.Config != nil {
		hash = img.Config.Labels[LabelRecipe]
	}
	return img, hash, true, nil
}

// sortedKeys returns a map's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// refName is the repository part of a reference ("ctrperf/x:tag" -> "ctrperf/x").
func refName(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}
