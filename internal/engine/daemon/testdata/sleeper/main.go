// Command sleeper is the smallest long-running process for FROM-scratch test
// images: it sleeps until killed.
package main

import "time"

func main() {
	for {
		time.Sleep(time.Hour)
	}
}
