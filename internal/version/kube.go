package version

import "errors"

// ErrNoKubernetes is what a program built with -tags nokube (make demo's
// build: no client-go, no CRI client, no grpc) answers when asked for
// something of Kubernetes: runtime kubernetes, isolate run --cri-socket,
// isolate manifest, isolate status --kubeconfig. Every such place says it
// in these words.
var ErrNoKubernetes = errors.New("this ctrperf was built without Kubernetes support (make demo's build, -tags nokube); run make build")
