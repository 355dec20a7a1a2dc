package main

import (
	"github.com/spf13/cobra"

	"ctrperf/internal/vm"
)

// newVMInitCmd is the init of runtime vm's guests: the kernel runs the
// initramfs's ctrperf as PID 1 with this command (vm.GuestInit).
func newVMInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__vminit",
		Short:  "The init of ctrperf's VM guests (PID 1): mount the root disk, serve the agent port",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return vm.GuestInit()
		},
	}
}
