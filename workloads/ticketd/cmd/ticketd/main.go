// Command ticketd is the web workload's server on its own (ctrperf runs the
// same program as `ctrperf __ticketd`); see package ticketd for its flags.
package main

import (
	"os"

	"ctrperf/workloads/ticketd"
)

func main() { os.Exit(ticketd.Main(os.Args[1:])) }
