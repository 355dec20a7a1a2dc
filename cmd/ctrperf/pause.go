package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"ctrperf/internal/selfbin"
)

// newPauseCmd is the pod sandbox's process in ctrperf's lab cluster (the
// ctrperf/pause image): it holds the pod's namespaces until SIGTERM or
// SIGINT and, as PID 1 of a pod that shares its PID namespace, reaps the
// orphans re-parented to it, as Kubernetes' own pause does.
func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    selfbin.Pause,
		Short:  "Hold a pod's namespaces until SIGTERM or SIGINT, reaping children (the lab cluster's sandbox image)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			sig := make(chan os.Signal, 8)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			defer signal.Stop(sig)
			for s := range sig {
				if s != syscall.SIGCHLD {
					return nil
				}
				reapChildren()
			}
			return nil
		},
	}
}

// reapChildren waits for every child that has exited, without blocking.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
