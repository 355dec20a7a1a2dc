package isolate

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// RunConfig is what `ctrperf isolate run` is given: the controller's
// parameters (Params, where their defaults, ranges and help live) and the
// command's own options. Each field is a flag of the command (its YAML key
// with dashes, or its flag tag; help from its help tag) and a key of its
// --config file, which DecodeRunConfig reads. It lives here rather than in
// cmd/ctrperf so that the decoder's fuzz target (FuzzIsolateConfig) links
// this package only, not the whole command.
type RunConfig struct {
	Params   `yaml:",inline"`
	All      bool     `yaml:"all" help:"manage every running container, not only those labelled ctrperf.isolate"`
	Labels   []string `yaml:"labels" flag:"label" help:"only manage containers that also carry this label (key or key=value; repeatable)"`
	DryRun   bool     `yaml:"dry_run" help:"decide and log, change nothing"`
	Metrics  string   `yaml:"metrics" help:"serve Prometheus metrics on HOST:PORT; :PORT or PORT binds loopback, a host that is not loopback is served with a warning (empty: off)"`
	Log      string   `yaml:"log" help:"decision log, JSON lines (default STATE_DIR/decisions.jsonl)"`
	StateDir string   `yaml:"state_dir" help:"where the lock, checkpoint and status live"`
	// CRISocket makes the controller a Kubernetes node's: pods labelled
	// ctrperf.isolate: "true" from the node's CRI runtime, entitled to
	// their CPU request.
	CRISocket string `yaml:"cri_socket" help:"manage the pods of this Kubernetes node's CRI runtime (containerd or CRI-O socket, e.g. /run/containerd/containerd.sock) instead of Docker's containers"`
	// KubeletDir is kubelet's root directory: its cpu_manager_state says
	// whether the static CPU manager owns the cpusets (then demote only).
	KubeletDir string `yaml:"kubelet_dir" help:"with --cri-socket: kubelet's root directory, whose cpu_manager_state says whether the static CPU manager owns the cpusets (then the controller only demotes)"`
}

// DecodeRunConfig reads an `isolate run --config` file over base strictly:
// an unknown key is an error, not a silently ignored typo; what the file
// does not name keeps base's value, and an empty file sets nothing.
func DecodeRunConfig(b []byte, base RunConfig) (RunConfig, error) {
	o := base
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
		return RunConfig{}, err
	}
	return o, nil
}
