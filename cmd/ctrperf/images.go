package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/image"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
)

// imageEngine returns the engine images are built on: the user's (DOCKER_HOST
// or the default socket), or else ctrperf's own default engine, started now
// and stopped by the returned close when this process started it (its data
// root persists, so the images stay for later runs).
func imageEngine(ctx context.Context) (*client.Client, func(), error) {
	d, err := daemon.Default(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("no Docker engine: %w", err)
	}
	if d.Private() {
		fmt.Fprintf(os.Stderr, "no engine answers at %s: using ctrperf's own engine %s at %s\n", daemon.UserHost(), d.Name(), d.Host())
	}
	closeFn := func() {
		cctx, cancel := lifecycle.Detached(ctx, 30*time.Second)
		defer cancel()
		if err := d.Close(cctx); err != nil {
			fmt.Fprintln(os.Stderr, "ctrperf: close engine:", err)
		}
	}
	return d.Client(), closeFn, nil
}

func newImagesCmd() *cobra.Command {
	var overrides []string
	var baseImage string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build, list and remove ctrperf's local images (no registry needed)",
		Long: `ctrperf builds its images locally, never pulling from a registry:
FROM-scratch images holding this ctrperf binary itself (its hidden command
__ticketd is the web workload's server; a copy, so no source tree or Go
toolchain is needed, and an unchanged binary is never rebuilt into them),
images derived from the base with the same binary, and the Debian base image
(` + image.DebianBase.Ref() + `: memcached, MariaDB, fio, sysbench, stress-ng)
made with debootstrap from this machine's apt mirror and imported. The base
image's rootfs tarball is cached in ` + image.DefaultCacheDir + ` (or
$CTRPERF_CACHE_DIR), so another engine imports it in seconds. Each image is
rebuilt only when its recipe changes.

To use your own images instead (e.g. from your registry, already pulled),
name them: --image NAME=REF, or the environment variable CTRPERF_IMAGE_<NAME>
(e.g. CTRPERF_IMAGE_DEBIAN_BASE); for the base image also --base-image or
` + image.BaseImageEnv + `. ctrperf then only checks that they exist.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			reg := image.Default()
			for _, o := range overrides {
				name, ref, ok := strings.Cut(o, "=")
				if !ok || name == "" || ref == "" {
					return exitcode.Usagef("--image %q: want NAME=REF", o)
				}
				if _, known := reg.Lookup(name); !known {
					return exitcode.Usagef("--image %s: no image named %q (known: %s)", o, name, knownNames())
				}
				reg.Override(name, ref)
			}
			if baseImage != "" {
				reg.Override(image.DebianBase.Name, baseImage)
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringArrayVar(&overrides, "image", nil, "use your own image for a recipe: NAME=REF (repeatable)")
	cmd.PersistentFlags().StringVar(&baseImage, "base-image", "", "use your own image instead of "+image.DebianBase.Ref())
	cmd.AddCommand(newImagesBuildCmd(), newImagesListCmd(), newImagesRmCmd())
	return cmd
}

func knownNames() string {
	var names []string
	for _, r := range image.Known() {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}

func newImagesBuildCmd() *cobra.Command {
	var force bool
	var forPlan string
	cmd := &cobra.Command{
		Use:   "build [NAME...|--for PLAN]",
		Short: "Build the named images (default: all known; --for PLAN: that plan's), skipping those whose recipe is unchanged",
		Long: `Build the named images, or with --for PLAN the images that plan's
configurations deploy and no others (the smoke plan: ticketd alone, FROM
scratch; the Debian base only for a plan that runs it), or else every known
image. An image whose recipe is unchanged is not rebuilt. bench run builds a
missing image on first use as well; this builds them ahead, with a line per
image and its time.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			reg := image.Default()
			if forPlan != "" {
				if len(args) > 0 {
					return exitcode.Usagef("images build: name images or give --for PLAN, not both")
				}
				p, _, err := bench.OpenPlan(forPlan, plan.Options{})
				if err != nil {
					return exitcode.AsUsage(err)
				}
				if args, err = bench.PlanImages(p); err != nil {
					return fmt.Errorf("images of plan %s: %w", forPlan, err)
				}
				if len(args) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "plan %s deploys no image\n", forPlan)
					return nil
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "plan %s deploys %s\n", forPlan, strings.Join(args, ", "))
			} else if len(args) == 0 {
				for _, r := range reg.Known() {
					args = append(args, r.Name)
				}
			}
			for _, a := range args {
				if _, ok := reg.Lookup(a); !ok && forPlan == "" {
					return exitcode.Usagef("no image named %q (known: %s)", a, knownNames())
				}
			}
			cli, closeEngine, err := imageEngine(ctx)
			if err != nil {
				return err
			}
			defer closeEngine()
			reg.SetProgress(cmd.ErrOrStderr())
			var opts []image.Option
			if force {
				opts = append(opts, image.WithForce())
			}
			out := cmd.OutOrStdout()
			for _, a := range args {
				start := time.Now()
				res, err := reg.Ensure(ctx, cli, []string{a}, opts...)
				if err != nil {
					return err
				}
				r := res[0]
				fmt.Fprintf(out, "%-14s %-36s %-9s %s  (%s)\n", r.Name, r.Ref, r.Action, imageShortID(r.ID), time.Since(start).Round(100*time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even when the recipe is unchanged (the base image: debootstrap again)")
	cmd.Flags().StringVar(&forPlan, "for", "", "build only the images this plan deploys (a built-in plan's name or a plan file)")
	return cmd
}

func newImagesListCmd() *cobra.Command {
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ctrperf's images with size, age, recipe hash and whether they are current",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cli, closeEngine, err := imageEngine(ctx)
			if err != nil {
				return err
			}
			defer closeEngine()
			st, err := image.Default().Status(ctx, cli)
			if err != nil {
				return err
			}
			if format.JSON() {
				return writeJSON(cmd.OutOrStdout(), struct {
					Images []image.Status `json:"images"`
				}{st})
			}
			t := table{header: []string{"NAME", "REF", "KIND", "STATE", "SIZE", "CREATED", "RECIPE", "IMAGE ID"}}
			for _, s := range st {
				size, created := "-", "-"
				if s.Size > 0 {
					size = units.HumanSize(float64(s.Size))
				}
				if s.Created > 0 {
					created = units.HumanDuration(time.Since(time.Unix(s.Created, 0))) + " ago"
				}
				state := string(s.State)
				if s.State == image.StateStale && s.RecipeHash != "" {
					state += " (now " + s.RecipeHash + ")"
				}
				t.add(imageDash(s.Name), s.Ref, imageDash(s.Kind), state, size, created, imageDash(s.Hash), imageDash(imageShortID(s.ID)))
			}
			if err := t.write(cmd.OutOrStdout(), format.String()); err != nil {
				return err
			}
			for _, s := range st {
				if s.Err != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: cannot compute its recipe hash: %s\n", s.Name, s.Err)
				}
			}
			return nil
		},
	}
	format = addFormatFlags(cmd, formatTable, formatJSON, formatMD, formatCSV)
	return cmd
}

func newImagesRmCmd() *cobra.Command {
	var all, cache bool
	cmd := &cobra.Command{
		Use:   "rm [NAME...|--all]",
		Short: "Remove ctrperf's images by name, or all of them (--cache also drops the base rootfs tarball)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return exitcode.AsUsage(errors.New("images rm: name the images to remove or give --all (not both)"))
			}
			ctx := cmd.Context()
			cli, closeEngine, err := imageEngine(ctx)
			if err != nil {
				return err
			}
			defer closeEngine()
			removed, rmErr := image.Remove(ctx, cli, args)
			for _, r := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", r)
			}
			if cache && (all || slices.Contains(args, image.DebianBase.Name)) {
				tarballs, _ := filepath.Glob(filepath.Join(image.CacheDir(), image.DebianBase.Name+"-*.tar"))
				for _, t := range tarballs {
					if err := os.Remove(t); err != nil {
						return fmt.Errorf("remove cached tarball: %w", err)
					}
					fmt.Fprintln(cmd.OutOrStdout(), "removed", t)
				}
			}
			return rmErr
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every image labelled "+image.LabelManaged+"=true")
	cmd.Flags().BoolVar(&cache, "cache", false, "also delete the cached base rootfs tarball (the next build debootstraps again)")
	return cmd
}

func imageShortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func imageDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
