// Command tinyhttp is the engine tests' workload: a static HTTP server that
// fits in a FROM-scratch image, plus file helpers for Exec (the image has no
// shell).
//
//	tinyhttp serve ADDR [NAME]  GET / answers "ok NAME"; GET /upstream fetches
//	                            http://$UPSTREAM/ and returns its body
//	tinyhttp write PATH TEXT    writes TEXT to PATH
//	tinyhttp cat PATH           prints PATH
//	tinyhttp fail TEXT          prints TEXT to stderr and exits 3
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		os.Args = append(os.Args, "serve", ":8080")
	}
	switch os.Args[1] {
	case "serve":
		name := "tinyhttp"
		if len(os.Args) > 3 {
			name = os.Args[3]
		}
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "ok %s\n", name) })
		http.HandleFunc("/upstream", func(w http.ResponseWriter, r *http.Request) {
			resp, err := http.Get("http://" + os.Getenv("UPSTREAM") + "/")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			io.Copy(w, resp.Body)
		})
		fmt.Fprintln(os.Stderr, "listening on", os.Args[2])
		fmt.Fprintln(os.Stderr, http.ListenAndServe(os.Args[2], nil))
		os.Exit(1)
	case "write":
		if err := os.MkdirAll(filepath.Dir(os.Args[2]), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.WriteFile(os.Args[2], []byte(os.Args[3]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "cat":
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "fail":
		fmt.Fprintln(os.Stderr, os.Args[2])
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
