package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/bench"
	"ctrperf/internal/doctor"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/vm"
	"ctrperf/plans"
)

func newDoctorCmd() *cobra.Command {
	var format *outputFormat
	var probeMounts bool
	var planNames []string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this machine supports and what each built-in plan still lacks here",
		Long: `ctrperf doctor reports the kernel, cgroup version and controllers, CPU
topology, cpufreq governor, irqbalance, the Docker engine ctrperf would use
(or that it will start a private one), which storage drivers and loop
filesystems private engines can use here, which tools are installed,
whether the engine can start --privileged containers (dockerd must hold
every capability: a plan's privileged: true is recorded not_run where it
does not), whether a VM runtime could run (which module provides KVM, whether a
stock guest boots through /dev/kvm, QEMU), and warnings with concrete advice.
Its "vm runtime" reason is what a plan's runtime: vm configuration with accel
kvm is recorded not_run with where no stock guest boots under KVM (accel tcg
runs wherever QEMU does, emulated). It starts nothing and changes nothing.
--format json prints the facts as the document bench writes as env.json,
with the plans' lacks beside them.

Then, for each built-in plan (--plan NAME for some), what it still lacks on
this machine and the command that provides it: the Debian packages of the
programs its configurations run (apt-get install ...; make bootstrap
installs every package ctrperf uses), the images not built yet (ctrperf
images build --for PLAN; bench also builds them on first use, the Debian
base with debootstrap), a Kubernetes cluster (make kube-up), the lab's SSH
hosts (make lab-up).

--probe-mounts (root) also mounts a small loop-backed ext4 and xfs with
each mount option of seed 004's comparison (noatime, data=writeback,
discard, barrier=0, nobarrier, ...) and reports which this kernel takes:
a plan's filesystem knob with a refused option is recorded not_run. The
probe's image, loop device and mount are named ctrperf-fs-probe-* and
removed before doctor exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseRemoteDocker("doctor"); err != nil {
				return err
			}
			var opts []doctor.Option
			if probeMounts {
				opts = append(opts, doctor.WithMountProbe())
			}
			names := planNames
			if len(names) == 0 {
				names = plans.Names()
			}
			f, err := doctor.Gather(cmd.Context(), opts...)
			if err != nil {
				return err
			}
			lacks, err := planLacks(cmd.Context(), f, names)
			if err != nil {
				return err
			}
			if format.JSON() {
				return writeJSON(cmd.OutOrStdout(), struct {
					*doctor.Facts
					Plans []bench.Lacks `json:"plans"`
				}{f, lacks})
			}
			if err := f.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			return writeLacks(cmd.OutOrStdout(), lacks)
		},
	}
	// JSON: the same document bench writes as env.json.
	format = addFormatFlags(cmd, formatTable, formatJSON)
	cmd.Flags().BoolVar(&probeMounts, "probe-mounts", false, "mount a small loop ext4 and xfs with seed 004's mount options to see which this kernel takes (root; removed afterwards)")
	cmd.Flags().StringSliceVar(&planNames, "plan", nil, "say what these built-in plans or plan files lack (default: every built-in plan)")
	return cmd
}

// planLacks says what each plan lacks on this machine, from doctor's facts,
// PATH and the default engine's images (when it answers).
func planLacks(ctx context.Context, f *doctor.Facts, names []string) ([]bench.Lacks, error) {
	m := bench.Machine{
		LookPath: exec.LookPath,
		Cluster:  false,
		Exists:   func(p string) bool { _, err := os.Stat(p); return err == nil },
	}
	if !f.VM.Usable {
		m.VM = f.VM.Reason
	}
	if !f.VMGuest.TCG.Usable {
		m.VMEmulated = f.VMGuest.TCG.Reason
	}
	if f.VMGuest.Virtiofsd == "" {
		m.VMVirtiofs = vm.ErrNoVirtiofsd.Error()
	}
	for _, k := range f.Kubernetes {
		m.Cluster = m.Cluster || k.Answers
	}
	m.Daemon, _ = daemon.ReadHostFacts() // a failed read leaves the facts empty: loop filesystems then lack
	if tarballs, _ := filepath.Glob(filepath.Join(image.CacheDir(), image.DebianBase.Name+"-*.tar")); len(tarballs) > 0 {
		m.BaseCached = true
	}
	if f.Docker.Answers {
		if cli, err := client.New(client.WithHost(f.Docker.Host)); err == nil {
			defer cli.Close()
			if st, err := image.Default().Status(ctx, cli); err == nil {
				m.Images = map[string]image.State{}
				for _, s := range st {
					m.Images[s.Name], m.Images[s.Ref] = s.State, s.State
				}
			}
		}
	}
	var out []bench.Lacks
	for _, name := range names {
		p, _, err := bench.OpenPlan(name, plan.Options{})
		if err != nil {
			return nil, exitcode.AsUsage(err)
		}
		l := bench.PlanLacks(p, m)
		l.Plan = name
		out = append(out, l)
	}
	return out, nil
}

// writeLacks is the plans' part of doctor's text: one line per lack with
// the command that provides it.
func writeLacks(w io.Writer, lacks []bench.Lacks) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "plans\twhat each still lacks here, and the command that provides it")
	for _, l := range lacks {
		var lines []string
		if len(l.Packages) > 0 {
			lines = append(lines, fmt.Sprintf("packages %s: %s", strings.Join(l.Packages, ", "), l.Install()))
		}
		for _, o := range l.Other {
			s := o.What
			if o.Fix != "" {
				s += ": " + o.Fix
			}
			lines = append(lines, s)
		}
		if len(l.Images) > 0 {
			lines = append(lines, fmt.Sprintf("images to build (missing or of an older recipe) %s: %s, else bench builds them on first use", strings.Join(l.Images, ", "), l.BuildImages()))
		}
		if len(lines) == 0 {
			lines = append(lines, "ready")
		} else if l.Ready() {
			lines[0] = "ready; " + lines[0]
		}
		for _, u := range l.Unchecked {
			lines = append(lines, "not checked: "+u)
		}
		for i, s := range lines {
			k := ""
			if i == 0 {
				k = "  " + l.Plan
			}
			fmt.Fprintf(tw, "%s\t%s\n", k, s)
		}
	}
	return tw.Flush()
}
