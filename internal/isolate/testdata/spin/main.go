// Command spin is a tenant for the isolate tests: idle until it gets
// SIGUSR1, then it keeps one CPU busy until SIGUSR2.
package main

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	var hot atomic.Bool
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	go func() {
		x := 0
		for {
			if hot.Load() {
				for i := 0; i < 1_000_000; i++ {
					x += i
				}
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	for s := range sig {
		switch s {
		case syscall.SIGUSR1:
			hot.Store(true)
		case syscall.SIGUSR2:
			hot.Store(false)
		default:
			os.Exit(0)
		}
	}
}
