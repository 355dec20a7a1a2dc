// Command httpd is a tiny static HTTP server that the Docker integration
// test builds into a FROM-scratch image, so that traffic through a published
// port has something to answer it without any registry.
package main

import (
	"log"
	"net/http"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	log.Fatal(http.ListenAndServe(":8080", nil))
}
