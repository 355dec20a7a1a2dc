// Package runtimes registers with bench the runtimes whose engines link a
// large client of their own (kubernetes: client-go), so that only the
// program that imports it links them: cmd/ctrperf does; bench, its tests
// and its fuzz target do not (`go list -deps ./internal/bench | grep
// k8s.io` prints nothing), and a program built with -tags nokube (make
// demo's build) links none of it: no client-go, API types, CRI client or
// grpc (TestNoKubeLinksNoKubernetes); what asks for them says
// version.ErrNoKubernetes.
package runtimes

// KubeconfigFlag is the runtime flag (bench.Engines.RuntimeFlags) of
// --kubeconfig, runtime kubernetes' kubeconfig.
const KubeconfigFlag = "kubeconfig"
