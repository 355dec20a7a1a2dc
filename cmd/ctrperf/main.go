// Command ctrperf measures what a container costs a workload, which
// configuration wins it back, and keeps quiet containers fast when a
// neighbour gets hot.
package main

import (
	"os"

	// Runtime kubernetes (client-go) for bench.Engines: registered here,
	// so that internal/bench does not link it.
	_ "ctrperf/internal/runtimes"
)

func main() {
	cmd, err := newRootCmd().ExecuteC()
	os.Exit(exitStatus(cmd, err, os.Stderr))
}
