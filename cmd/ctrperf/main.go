// Command ctrperf measures what a container costs a workload, which
// configuration wins it back, and keeps quiet containers fast when a
// neighbour gets hot.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "ctrperf:", ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "ctrperf:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code to the one exit point.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
