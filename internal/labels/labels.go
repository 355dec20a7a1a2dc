// Package labels holds the label keys that mark ctrperf's containers,
// networks, volumes and images, and that opt a container in to the isolate
// controller. It is a leaf (no imports) so that a workload can set a label
// without linking the package that reads it (isolate links the Docker SDK
// and client_golang).
package labels

const (
	Managed = "ctrperf.managed" // "true" on every object ctrperf creates
	Run     = "ctrperf.run"     // the run id
	Service = "ctrperf.service" // the service name inside a deployment
	// Role is "client" on a load generator's container (kv's load.client:
	// container), which runtime kubernetes places on kubernetes.client_node.
	Role = "ctrperf.role"

	Isolate     = "ctrperf.isolate"      // any value but "false" opts a container in to isolate
	IsolateCPUs = "ctrperf.isolate.cpus" // CPUs it is entitled to (and dedicated, when pinned)
)
