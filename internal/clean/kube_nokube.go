//go:build nokube

package clean

import (
	"context"
	"io"
)

// kubeNamespaces does nothing in a program built without runtime kubernetes
// (-tags nokube, make demo's build): it made no namespace to remove.
func kubeNamespaces(context.Context, Options, io.Writer) ([]string, error) { return nil, nil }
