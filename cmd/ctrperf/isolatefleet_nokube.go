//go:build nokube

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// fleetStatus needs client-go, which a program built without runtime
// kubernetes (-tags nokube, make demo's build) does not link.
func fleetStatus(*cobra.Command, string, string, bool) error {
	return errors.New("isolate status --kubeconfig: this program was built without runtime kubernetes (make demo's build): make build links it")
}
