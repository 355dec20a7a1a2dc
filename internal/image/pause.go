package image

import "ctrperf/internal/selfbin"

// Pause is the recipe of ctrperf's pod sandbox image, ctrperf/pause: the
// ctrperf binary FROM scratch running `ctrperf __pause`. The lab cluster
// (scripts/kube.sh) has no registry to pull registry.k8s.io/pause from; it
// imports this image into each node's containerd and names it as the
// sandbox image.
var Pause = Program("pause", "ctrperf/pause:latest", selfbin.Pause)

func init() { Register(Recipe{Name: Pause.Name, Derived: &Pause}) }
