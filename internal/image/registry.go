package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

// ErrMissing is wrapped when an image must already exist on the engine (a
// user-named image, a parent) and does not.
var ErrMissing = errors.New("image not on the engine")

// Recipe is a named way to make an image. Exactly one of Go, Derived and
// Base is set.
type Recipe struct {
	Name    string // short name: `ctrperf images build NAME`, CTRPERF_IMAGE_<NAME>
	Go      *GoImage
	Derived *Derived // From may name another recipe (by name or ref); it is built first
	Base    *Base
}

// Ref is the reference the recipe builds.
func (r Recipe) Ref() string {
	switch {
	case r.Go != nil:
		return r.Go.Ref
	case r.Derived != nil:
		return r.Derived.Ref
	case r.Base != nil:
		return r.Base.Ref()
	}
	return ""
}

// Kind names the recipe's kind for listings.
func (r Recipe) Kind() string {
	switch {
	case r.Go != nil:
		return "go"
	case r.Derived != nil:
		return "derived"
	case r.Base != nil:
		return "debootstrap"
	}
	return ""
}

func (r Recipe) validate() error {
	n := 0
	for _, set := range []bool{r.Go != nil, r.Derived != nil, r.Base != nil} {
		if set {
			n++
		}
	}
	if r.Name == "" || n != 1 || r.Ref() == "" {
		return fmt.Errorf("image recipe %q: needs a name, exactly one of Go/Derived/Base, and a ref", r.Name)
	}
	return nil
}

// Registry holds the known recipes and the user's overrides.
type Registry struct {
	mu        sync.Mutex
	recipes   map[string]Recipe
	overrides map[string]string
	getenv    func(string) string
	progress  io.Writer
}

// NewRegistry returns an empty registry reading overrides through getenv
// (os.Getenv in the program, a map in tests).
func NewRegistry(getenv func(string) string) *Registry {
	return &Registry{recipes: map[string]Recipe{}, overrides: map[string]string{}, getenv: getenv, progress: io.Discard}
}

var defaultRegistry = func() *Registry {
	r := NewRegistry(os.Getenv)
	r.progress = os.Stderr
	base := DebianBase
	r.MustRegister(Recipe{Name: base.Name, Base: &base})
	return r
}()

// Default is the process-wide registry: DebianBase plus whatever workload
// packages register in their init.
func Default() *Registry { return defaultRegistry }

// Register adds a recipe to the default registry; it panics on an invalid or
// duplicate recipe (a programming error, found at init).
func Register(r Recipe) { defaultRegistry.MustRegister(r) }

// Known lists the default registry's recipes by name.
func Known() []Recipe { return defaultRegistry.Known() }

// Resolve returns the reference to deploy for a recipe name or ref, after
// overrides, using the default registry.
func Resolve(nameOrRef string) string { return defaultRegistry.Resolve(nameOrRef) }

// Ensure makes sure images exist on an engine, using the default registry
// (progress to stderr). See Registry.Ensure.
func Ensure(ctx context.Context, api API, refs ...string) ([]Result, error) {
	return defaultRegistry.Ensure(ctx, api, refs)
}

// MustRegister adds a recipe; it panics on an invalid or duplicate one.
func (g *Registry) MustRegister(r Recipe) {
	if err := r.validate(); err != nil {
		panic(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, dup := g.recipes[r.Name]; dup {
		panic("image recipe registered twice: " + r.Name)
	}
	g.recipes[r.Name] = r
}

// SetProgress sends build progress to w.
func (g *Registry) SetProgress(w io.Writer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.progress = w
}

// Override makes name resolve to ref (a flag's value; it wins over the
// environment).
func (g *Registry) Override(name, ref string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.overrides[name] = ref
}

// Known lists the recipes by name.
func (g *Registry) Known() []Recipe {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Recipe, 0, len(g.recipes))
	for _, k := range sortedKeys(g.recipes) {
		out = append(out, g.recipes[k])
	}
	return out
}

// Lookup finds a recipe by name or by the ref it builds.
func (g *Registry) Lookup(nameOrRef string) (Recipe, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.recipes[nameOrRef]; ok {
		return r, true
	}
	for _, r := range g.recipes {
		if r.Ref() == nameOrRef || refName(r.Ref()) == nameOrRef {
			return r, true
		}
	}
	return Recipe{}, false
}

// Debootstraps says whether building an image runs debootstrap: it is the
// Debian base, or built FROM it through its known parents. An image the user
// overrode is never built, so never debootstraps.
func (g *Registry) Debootstraps(nameOrRef string) bool {
	seen := map[string]bool{}
	for {
		r, ok := g.Lookup(nameOrRef)
		if !ok || seen[r.Name] {
			return false
		}
		if ref, _ := g.override(r.Name); ref != "" {
			return false
		}
		seen[r.Name] = true
		switch {
		case r.Base != nil:
			return true
		case r.Derived != nil && r.Derived.From != Scratch:
			nameOrRef = r.Derived.From
		default:
			return false
		}
	}
}

// EnvName is the environment variable that overrides a recipe's image:
// CTRPERF_IMAGE_ and the name in upper case with '-' and '.' as '_'.
func EnvName(name string) string {
	return "CTRPERF_IMAGE_" + strings.NewReplacer("-", "_", ".", "_", "/", "_").Replace(strings.ToUpper(name))
}

// BaseImageEnv also overrides DebianBase (the name the error messages give).
const BaseImageEnv = "CTRPERF_BASE_IMAGE"

// override returns the user's image for a recipe name and where it came
// from, or "".
func (g *Registry) override(name string) (ref, source string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ref := g.overrides[name]; ref != "" {
		return ref, "flag"
	}
	if ref := g.getenv(EnvName(name)); ref != "" {
		return ref, EnvName(name)
	}
	if name == DebianBase.Name {
		if ref := g.getenv(BaseImageEnv); ref != "" {
			return ref, BaseImageEnv
		}
	}
	return "", ""
}

// Resolve returns the reference to deploy: the user's override of the
// recipe, else the recipe's ref, else nameOrRef itself.
func (g *Registry) Resolve(nameOrRef string) string {
	r, ok := g.Lookup(nameOrRef)
	if !ok {
		return nameOrRef
	}
	if ref, _ := g.override(r.Name); ref != "" {
		return ref
	}
	return r.Ref()
}

// Ensure makes each image exist on the engine api talks to, in order, and
// returns what it did for each (Result.Ref is the reference to deploy):
//
//   - a name or ref the user overrode: only checked to exist (never pulled);
//   - a known recipe: built when missing or stale (the base image imported
//     from the cached tarball when there is one), parents first;
//   - anything else: checked to exist.
//
// It stops at the first image it cannot provide.
func (g *Registry) Ensure(ctx context.Context, api API, refs []string, opts ...Option) ([]Result, error) {
	g.mu.Lock()
	opts = append([]Option{WithProgress(g.progress)}, opts...)
	g.mu.Unlock()
	var out []Result
	for _, ref := range refs {
		res, err := g.ensure(ctx, api, ref, opts, map[string]bool{})
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (g *Registry) ensure(ctx context.Context, api API, nameOrRef string, opts []Option, visiting map[string]bool) (Result, error) {
	r, known := g.Lookup(nameOrRef)
	if !known {
		return requireExisting(ctx, api, Result{Ref: nameOrRef}, "")
	}
	if ref, source := g.override(r.Name); ref != "" {
		return requireExisting(ctx, api, Result{Name: r.Name, Ref: ref}, source)
	}
	if visiting[r.Name] {
		return Result{Name: r.Name, Ref: r.Ref()}, fmt.Errorf("image recipe %s builds FROM itself (through its parents)", r.Name)
	}
	visiting[r.Name] = true
	switch {
	case r.Base != nil:
		return BuildBase(ctx, api, *r.Base, opts...)
	case r.Go != nil:
		g := *r.Go
		if g.Name == "" {
			g.Name = r.Name
		}
		return BuildGo(ctx, api, g, opts...)
	default:
		d := *r.Derived
		if d.Name == "" {
			d.Name = r.Name
		}
		if d.From != Scratch {
			if _, parentKnown := g.Lookup(d.From); parentKnown {
				// The parent is built with the caller's options but never
				// forced: forcing one image must not rebuild its base.
				parent, err := g.ensure(ctx, api, d.From, append(opts[:len(opts):len(opts)], unforce), visiting)
				if err != nil {
					return Result{Name: r.Name, Ref: d.Ref}, fmt.Errorf("image %s: parent: %w", r.Name, err)
				}
				d.From = parent.Ref
			}
		}
		return BuildFrom(ctx, api, d, opts...)
	}
}

func unforce(o *options) { o.force = false }

// requireExisting checks that an image someone else provides is on the engine.
func requireExisting(ctx context.Context, api API, res Result, source string) (Result, error) {
	img, _, found, err := existing(ctx, api, res.Ref)
	if err != nil {
		return res, err
	}
	if !found {
		how := "it is not a ctrperf recipe"
		if source != "" {
			how = "it was named by " + source
		}
		return res, fmt.Errorf("image %s is not on this engine and %s; ctrperf never pulls: `docker pull` or `docker load` it first: %w", res.Ref, how, ErrMissing)
	}
	res.ID, res.Action = img.ID, ActionExternal
	return res, nil
}

// State is how an engine's image compares with its recipe.
type State string

const (
	StateCurrent  State = "current"  // built from the recipe as it is now
	StateStale    State = "stale"    // built from an older recipe (or its parent changed)
	StateMissing  State = "missing"  // not on the engine
	StateExternal State = "external" // the user named their own image
	StateUnknown  State = "unknown"  // a ctrperf image no recipe in this build makes
)

// Status is one line of `ctrperf images list`.
type Status struct {
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	Kind       string `json:"kind,omitempty"`
	State      State  `json:"state"`
	ID         string `json:"id,omitempty"`
	Hash       string `json:"hash,omitempty"`        // the image's recipe label
	RecipeHash string `json:"recipe_hash,omitempty"` // what the recipe hashes to now
	Size       int64  `json:"size,omitempty"`
	Created    int64  `json:"created,omitempty"` // unix seconds
	Err        string `json:"error,omitempty"`   // why the recipe hash could not be computed
}

// Status compares each known recipe with the engine's image, and lists
// ctrperf images no recipe makes. A recipe whose hash cannot be computed
// (no apt sources, a Go package that does not build) is reported with Err,
// not an abort.
func (g *Registry) Status(ctx context.Context, api API) ([]Status, error) {
	var out []Status
	seen := map[string]bool{}
	for _, r := range g.Known() {
		st := Status{Name: r.Name, Ref: r.Ref(), Kind: r.Kind()}
		if ref, _ := g.override(r.Name); ref != "" {
			st.Ref, st.State = ref, StateExternal
		}
		img, hash, found, err := existing(ctx, api, st.Ref)
		if err != nil {
			return out, err
		}
		if found {
			st.ID, st.Hash, st.Size = img.ID, hash, img.Size
			seen[img.ID] = true
		}
		if st.State == StateExternal {
			if !found {
				st.State = StateMissing
			}
			out = append(out, st)
			continue
		}
		st.RecipeHash, err = g.recipeHash(ctx, api, r)
		if err != nil {
			st.Err = err.Error()
		}
		switch {
		case !found:
			st.State = StateMissing
		case st.Hash == st.RecipeHash:
			st.State = StateCurrent
		default:
			st.State = StateStale
		}
		out = append(out, st)
	}
	managed, err := listManaged(ctx, api)
	if err != nil {
		return out, err
	}
	for _, s := range managed {
		if seen[s.ID] {
			continue
		}
		ref := "<none>"
		if len(s.RepoTags) > 0 {
			ref = s.RepoTags[0]
		}
		st := Status{Name: s.Labels[LabelName], Ref: ref, State: StateUnknown, ID: s.ID, Hash: s.Labels[LabelRecipe], Size: s.Size, Created: s.Created}
		if r, ok := g.Lookup(st.Name); ok && st.Name != "" {
			st.Kind = r.Kind()
			st.State = StateStale // an older build of a known recipe, still tagged
		}
		out = append(out, st)
	}
	// Created comes from the list call, which the inspect calls above lack.
	for i := range out {
		for _, s := range managed {
			if s.ID == out[i].ID {
				out[i].Created = s.Created
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// recipeHash computes what r's recipe hashes to now on this engine.
func (g *Registry) recipeHash(ctx context.Context, api API, r Recipe) (string, error) {
	switch {
	case r.Base != nil:
		return BaseHash(*r.Base)
	case r.Go != nil:
		p, err := planDerived(ctx, api, r.Go.Derived())
		return p.hash, err
	default:
		d := *r.Derived
		if d.From != Scratch {
			d.From = g.Resolve(d.From)
		}
		p, err := planDerived(ctx, api, d)
		return p.hash, err
	}
}
