package main

import (
	"github.com/spf13/cobra"

	"ctrperf/internal/doctor"
)

func newDoctorCmd() *cobra.Command {
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this machine supports: kernel, cgroups, CPUs, Docker, storage drivers, tools",
		Long: `ctrperf doctor reports the kernel, cgroup version and controllers, CPU
topology, cpufreq governor, irqbalance, the Docker engine ctrperf would use
(or that it will start a private one), which storage drivers and loop
filesystems private engines can use here, which tools are installed, and
warnings with concrete advice. It starts nothing and changes nothing.
--format json prints the facts as the document bench writes as env.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := doctor.Gather(cmd.Context())
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
	return cmd
}
