//go:build nokube

package manifest

import "ctrperf/internal/version"

// YAML cannot build the objects in a program built without Kubernetes
// support: it says so.
func YAML(Options) ([]byte, error) { return nil, version.ErrNoKubernetes }
