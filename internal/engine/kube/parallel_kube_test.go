package kube

import (
	"flag"
	"os"
	"testing"
)

// kubeParallel is how many cluster tests run at once (go test's -parallel,
// unless given): they wait on the cluster far more than they compute — a
// namespace's deletion alone takes the namespace controller's fixed 5 s
// before it starts — so GOMAXPROCS (2 here) would serialise the waits.
const kubeParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", kubeParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// parallelKube marks a cluster test that may run beside the other such
// tests of the package: it works in namespaces of its own sessions and
// asserts on its own objects only. `ctrperf clean` (TestKillThenCleanKube)
// keeps every namespace whose owner lives, and the others' are this
// process's. No test here but TestStaticCPUManagerKube requests CPU on the
// static node (its Guaranteed pod needs the node's one allocatable CPU) or
// makes a Guaranteed pod (which would shrink that node's shared pool under
// its Burstable pod). TestSamplerAgentKube stays sequential (it runs
// first, alone): its pod must use up a CPU quota of 0.2 within a fixed
// 3.5 s window, which two busy cores shared with a dozen tests need not
// give it.
func parallelKube(t *testing.T) {
	t.Helper()
	t.Parallel()
}
