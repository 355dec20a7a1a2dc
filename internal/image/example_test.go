package image_test

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"ctrperf/internal/image"
)

// A workload package registers its images in init; bench and
// `ctrperf images build` then make them exist on any engine.
func ExampleRegister() {
	image.Register(image.Recipe{Name: "example-ticketd", Go: &image.GoImage{
		Ref:     "ctrperf/example-ticketd:latest",
		Package: "./workloads/ticketd",
		Args:    []string{"-listen", ":8080"},
	}})
	// App and MariaDB in one container: the base image plus the program
	// and an entrypoint script that starts both.
	image.Register(image.Recipe{Name: "example-web-combined", Derived: &image.Derived{
		Ref:  "ctrperf/example-web-combined:latest",
		From: image.DebianBase.Name, // built first; a user's CTRPERF_IMAGE_DEBIAN_BASE is used instead if set
		Files: map[string]image.File{
			"/usr/local/bin/ticketd": {GoPackage: "./workloads/ticketd"},
			"/entrypoint.sh":         {Mode: 0o755, Data: []byte("#!/bin/sh\nmariadbd --user=mysql &\nexec ticketd \"$@\"\n")},
		},
		Entrypoint: []string{"/entrypoint.sh"},
	}})
}

// Before deploying, make the images exist and deploy what Ensure returns:
// with an override it is the user's image, not the recipe's ref.
func ExampleEnsure() {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	res, err := image.Ensure(context.Background(), cli, image.DebianBase.Name)
	if err != nil {
		fmt.Println(err) // says what to do: not reachable mirror, missing override, ...
		return
	}
	fmt.Println("deploy", res[0].Ref)
}
