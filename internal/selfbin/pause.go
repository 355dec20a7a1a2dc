package selfbin

// Pause is the hidden command that holds a pod's namespaces: the sandbox
// ("pause") image of ctrperf's lab cluster (make kube-up) runs
// `ctrperf __pause`, which sleeps until SIGTERM or SIGINT and reaps the
// children a shared PID namespace hands it.
const Pause = "__pause"
