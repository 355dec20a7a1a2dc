// Command kube is one multi-call binary of the Kubernetes components that
// ctrperf's lab cluster runs (make kube-up, scripts/kube.sh): its first
// argument names the component, the rest are that component's own flags.
//
//	bin/kube kube-apiserver --etcd-servers=...
//	bin/kube kubectl --kubeconfig /var/lib/ctrperf/kube/kubeconfig get nodes
//
// One binary instead of six keeps the build to one link and the disk to
// about one component's size; each component is the cobra command its own
// main in k8s.io/kubernetes/cmd builds, run the same way (cli.Run).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zones, as kube-apiserver and kube-controller-manager have it

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components build each command lazily: only the one asked for registers
// its flags.
var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

func main() {
	// Called as a symlink (kube-apiserver -> kube) or as "kube <component>".
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if _, ok := components[name]; !ok && name != "kubectl" {
		if len(args) == 0 {
			usage()
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	// Each component reads os.Args as its own main would see them (kubectl
	// looks for plugins there): the component's name, then its flags.
	os.Args = append([]string{name}, args...)
	if name == "kubectl" {
		os.Exit(runKubectl())
	}
	newCommand, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", name)
		usage()
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}

// runKubectl is kubectl's own main (k8s.io/kubernetes/cmd/kubectl).
func runKubectl() int {
	logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err) // prints and exits
	}
	return 0
}

func usage() {
	names := []string{"kubectl"}
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: kube <%s> [flags]\n", strings.Join(names, "|"))
}
