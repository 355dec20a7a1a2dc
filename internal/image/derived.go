package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"ctrperf/internal/selfbin"
)

// Scratch is the From of an image that starts empty.
const Scratch = "scratch"

// Derived is an image made from another one by adding files and setting the
// process to run. BuildFrom builds it.
type Derived struct {
	Name       string            // recipe name, goes into the LabelName label
	Ref        string            // e.g. "ctrperf/web-combined:latest"
	From       string            // reference of the parent image, or Scratch
	Files      map[string]File   // absolute path in the image -> content
	Env        map[string]string // ENV
	Workdir    string
	User       string
	Entrypoint []string // exec form; nil keeps the parent's
	Cmd        []string // exec form; nil keeps the parent's
	// ModuleDir is the module root for Files with a GoPackage; "" finds it
	// from the working directory.
	ModuleDir string
}

// BuildFrom builds d unless the engine already has d.Ref with the same recipe
// hash. The hash covers the parent image's ID, the generated Dockerfile and
// every file's path, mode and content, so a rebuilt parent makes the derived
// image stale too. From must already exist on the engine (Ensure builds a
// known parent first); nothing is ever pulled.
func BuildFrom(ctx context.Context, api API, d Derived, opts ...Option) (Result, error) {
	o := buildOptions(opts)
	res := Result{Name: d.Name, Ref: d.Ref}
	plan, err := planDerived(ctx, api, d)
	if err != nil {
		return res, err
	}
	res.Hash = plan.hash
	return buildUnlessCached(ctx, api, res, o, func() error {
		fmt.Fprintf(o.progress, "building %s (recipe %s) from %s\n", d.Ref, res.Hash, d.From)
		tarCtx, err := buildContext(plan.dockerfile, plan.files)
		if err != nil {
			return fmt.Errorf("image %s: %w", d.Ref, err)
		}
		return runBuild(ctx, api, tarCtx, d.Ref, imageLabels(d.Name, res.Hash, o.labels), o.progress)
	})
}

// buildUnlessCached returns res as cached when the engine has res.Ref built
// from the recipe res.Hash (and the build is not forced); else it runs build
// and returns the image build made.
func buildUnlessCached(ctx context.Context, api API, res Result, o options, build func() error) (Result, error) {
	img, hash, found, err := existing(ctx, api, res.Ref)
	if err != nil {
		return res, err
	}
	if found && hash == res.Hash && !o.force {
		res.ID, res.Action = img.ID, ActionCached
		return res, nil
	}
	if err := build(); err != nil {
		return res, err
	}
	res, err = built(ctx, api, res, res.Ref)
	if err == nil && found {
		dropReplaced(ctx, api, img, res, o.progress)
	}
	return res, err
}

// dropReplaced removes the image that a rebuild of res.Ref displaced, so
// that rebuilding an image does not leave its old version behind, untagged,
// on every change of its recipe. Only that one image goes, and only when it
// is still ctrperf's own: it was under the ref ctrperf just rebuilt, it
// carries that recipe's name, it has no tag left, and nothing depends on it
// (the engine refuses, without force, when a container or a child image
// uses it; then it stays, and progress says so).
func dropReplaced(ctx context.Context, api API, old image.InspectResponse, res Result, progress io.Writer) {
	if old.ID == "" || old.ID == res.ID || old.Config == nil || old.Config.Labels[LabelManaged] != "true" || old.Config.Labels[LabelName] != res.Name {
		return
	}
	now, err := api.ImageInspect(ctx, old.ID)
	if err != nil || len(now.RepoTags) > 0 {
		return
	}
	short := strings.TrimPrefix(old.ID, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	if _, err := api.ImageRemove(ctx, old.ID, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
		fmt.Fprintf(progress, "%s: the image it replaced (%s) stays: %v\n", res.Ref, short, err)
		return
	}
	fmt.Fprintf(progress, "%s: removed the image it replaced (%s)\n", res.Ref, short)
}

// derivedPlan is a derived image with its inputs resolved.
type derivedPlan struct {
	files      map[string]File
	dockerfile dockerfile
	hash       string
}

// planDerived builds the Go programs d needs and computes its recipe hash,
// which needs the parent's image ID from the engine.
func planDerived(ctx context.Context, api API, d Derived) (derivedPlan, error) {
	var p derivedPlan
	if d.Ref == "" || d.From == "" {
		return p, fmt.Errorf("image %q: Ref and From are required", d.Name)
	}
	if err := validateEnv(d.Env); err != nil {
		return p, fmt.Errorf("image %s: %w", d.Ref, err)
	}
	files, err := resolveFiles(ctx, d.ModuleDir, d.Files, d.From == Scratch)
	if err != nil {
		return p, fmt.Errorf("image %s: %w", d.Ref, err)
	}
	fromID := Scratch
	if d.From != Scratch {
		parent, _, found, err := existing(ctx, api, d.From)
		if err != nil {
			return p, fmt.Errorf("image %s: %w", d.Ref, err)
		}
		if !found {
			return p, fmt.Errorf("image %s: parent image %s is not on this engine (ctrperf never pulls): build it first with `ctrperf images build` or load it with `docker load`: %w", d.Ref, d.From, ErrMissing)
		}
		fromID = parent.ID
	}
	p.files = files
	p.dockerfile = dockerfile{From: d.From, CopyRootfs: len(files) > 0, Env: d.Env, Workdir: d.Workdir, User: d.User, Entrypoint: d.Entrypoint, Cmd: d.Cmd}
	p.hash = derivedHash(fromID, p.dockerfile, files)
	return p, nil
}

// derivedHash is the recipe hash of a derived image.
func derivedHash(fromID string, df dockerfile, files map[string]File) string {
	var h hasher
	h.add("kind", "derived")
	h.add("from", fromID)
	h.add("dockerfile", df.String())
	for _, p := range sortedKeys(files) {
		f := files[p]
		h.add("file", p)
		h.add("mode", strconv.FormatUint(uint64(fileMode(f)), 8))
		h.addBytes("data", f.Data)
	}
	return h.sum()
}

func fileMode(f File) uint32 {
	if m := f.Mode.Perm(); m != 0 {
		return uint32(m)
	}
	if f.GoPackage != "" || f.Self {
		return 0o755
	}
	return 0o644
}

// resolveFiles returns files with the ctrperf binary (Self) and every
// GoPackage built into Data, and every mode made explicit. In an image FROM
// scratch a dynamically linked ctrperf gets its loader and libraries beside
// it; on a parent image it uses the parent's (ctrperf's parents are
// Debian, with glibc).
func resolveFiles(ctx context.Context, moduleDir string, in map[string]File, scratch bool) (map[string]File, error) {
	out := make(map[string]File, len(in))
	for _, p := range sortedKeys(in) {
		if _, err := imagePath(p); err != nil {
			return nil, err
		}
		f := in[p]
		f.Mode = modeOf(fileMode(f))
		if f.Self && f.GoPackage != "" {
			return nil, fmt.Errorf("file %s: Self and GoPackage both set", p)
		}
		if f.Self {
			bin, err := selfbin.Read()
			if err != nil {
				return nil, err
			}
			f.Data, f.Self = bin.Data, false
			if scratch {
				libs, err := bin.Runtime("/")
				if err != nil {
					return nil, fmt.Errorf("ctrperf binary %s: %w", bin.Path, err)
				}
				for lp, data := range libs {
					if _, ok := in[lp]; !ok {
						out[lp] = File{Mode: 0o755, Data: data}
					}
				}
			}
		}
		if f.GoPackage != "" {
			bin, err := goBuild(ctx, moduleDir, f.GoPackage)
			if err != nil {
				return nil, err
			}
			f.Data, f.GoPackage = bin, ""
		}
		out[p] = f
	}
	return out, nil
}

// runBuild sends a build context to the engine's classic builder (which needs
// no registry for FROM scratch or a local parent) and fails with the
// builder's own message when a step fails.
func runBuild(ctx context.Context, api API, tarCtx []byte, ref string, labels map[string]string, progress io.Writer) error {
	return runBuildFile(ctx, api, tarCtx, "Dockerfile", ref, labels, progress)
}

// runBuildFile is runBuild with the Dockerfile at another path of the
// context. The classic builder never pulls a parent that exists locally
// (PullParent stays false); callers check that every parent exists.
func runBuildFile(ctx context.Context, api API, tarCtx []byte, dockerfile, ref string, labels map[string]string, progress io.Writer) error {
	resp, err := api.ImageBuild(ctx, bytes.NewReader(tarCtx), client.ImageBuildOptions{
		Tags:        []string{ref},
		Labels:      labels,
		Remove:      true,
		ForceRemove: true,
		Dockerfile:  dockerfile,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	if err := readMessages(resp.Body, progress); err != nil {
		return fmt.Errorf("build image %s: %w", ref, err)
	}
	return nil
}

// engineMessage is one line of the JSON stream the engine answers a build or
// an import with.
type engineMessage struct {
	Stream string `json:"stream"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// readMessages copies the engine's progress to w and returns the first
// error the engine reported in the stream (a failed RUN, a missing parent).
func readMessages(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var m engineMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read engine progress: %w", err)
		}
		if m.Error != "" {
			return errors.New(strings.TrimSpace(m.Error))
		}
		if m.Stream != "" {
			io.WriteString(w, m.Stream)
		} else if m.Status != "" {
			fmt.Fprintln(w, m.Status)
		}
	}
}

// built is res once a build of ref has reported success: the image the
// engine now has under ref, or an error when it has none.
func built(ctx context.Context, api API, res Result, ref string) (Result, error) {
	img, _, found, err := existing(ctx, api, ref)
	if err != nil {
		return res, err
	}
	if !found {
		return res, fmt.Errorf("image %s: the build reported success but the engine has no such image", ref)
	}
	res.ID, res.Action = img.ID, ActionBuilt
	return res, nil
}
