// probe is the lab tests' container program (FROM scratch, imported into
// lab-sut's engine): "probe addrs" prints the container's IPv4 addresses
// and cgroups; "probe serve ADDR" answers each connection with a line.
package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"ctrperf/internal/kernel"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe addrs | serve ADDR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "addrs":
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				fmt.Println("addr", n.IP)
			}
		}
		b, _ := os.ReadFile(filepath.Join(kernel.ProcMount, "self", "cgroup"))
		os.Stdout.Write(b)
	case "serve":
		l, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				continue
			}
			fmt.Fprintln(c, "ctrperf-lab-probe")
			c.Close()
		}
	}
}
