// Command hello is the example service of "Benchmark your own application"
// (README.md): a tiny HTTP service that keeps notes as files in a data
// directory, so that where the data lives (a container's writable layer, a
// volume, tmpfs) shows in its latency.
//
//	hello -listen ADDR -data DIR
//
//	GET  /           "hello"
//	GET  /healthz    "ok" (the readiness check)
//	POST /notes      stores the body as a new note, 201 with "id=N"
//	GET  /notes/N    the note
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	data := flag.String("data", "/data", "directory the notes are written to")
	flag.Parse()
	if err := os.MkdirAll(*data, 0o755); err != nil {
		log.Fatal(err)
	}
	var next atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := next.Add(1)
		f, err := os.Create(filepath.Join(*data, strconv.FormatInt(id, 10)))
		if err == nil {
			_, err = f.Write(body)
			if err == nil {
				err = f.Sync() // a note is durable once acknowledged
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "id=%d\n", id)
	})
	mux.HandleFunc("GET /notes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, filepath.Join(*data, strconv.FormatInt(id, 10)))
	})
	log.Printf("hello: listening on %s, notes in %s", *listen, *data)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
