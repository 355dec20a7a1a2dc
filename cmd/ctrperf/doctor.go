package main

import (
	"github.com/spf13/cobra"

	"ctrperf/internal/doctor"
)

func newDoctorCmd() *cobra.Command {
	var format *outputFormat
	var probeMounts bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this machine supports: kernel, cgroups, CPUs, Docker, storage drivers, tools",
		Long: `ctrperf doctor reports the kernel, cgroup version and controllers, CPU
topology, cpufreq governor, irqbalance, the Docker engine ctrperf would use
(or that it will start a private one), which storage drivers and loop
filesystems private engines can use here, which tools are installed,
whether the engine can start --privileged containers (dockerd must hold
every capability: a plan's privileged: true is recorded not_run where it
does not), whether a VM runtime could run (which module provides KVM, whether a test
guest runs through /dev/kvm, QEMU), and warnings with concrete advice. Its
"vm runtime" reason is what a plan's runtime: vm configuration is recorded
not_run with (ctrperf has no VM runtime). It starts nothing and changes nothing.
--format json prints the facts as the document bench writes as env.json.

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
			f, err := doctor.Gather(cmd.Context(), opts...)
			if err != nil {
				return err
			}
			if format.JSON() {
				return writeJSON(cmd.OutOrStdout(), f)
			}
			return f.WriteText(cmd.OutOrStdout())
		},
	}
	// JSON: the same document bench writes as env.json.
	format = addFormatFlags(cmd, formatTable, formatJSON)
	cmd.Flags().BoolVar(&probeMounts, "probe-mounts", false, "mount a small loop ext4 and xfs with seed 004's mount options to see which this kernel takes (root; removed afterwards)")
	return cmd
}
