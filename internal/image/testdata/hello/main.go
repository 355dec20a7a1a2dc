// Command hello is the tiny program the image tests put into a FROM-scratch
// image: it prints its arguments, and with -file the content of that file.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	file := flag.String("file", "", "print this file too")
	flag.Parse()
	fmt.Printf("hello from scratch: %s\n", strings.Join(flag.Args(), " "))
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("file: %s", b)
	}
}
