package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/isolate"
	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/version"
)

const isolateStateDir = isolate.DefaultStateDir

// isolateOptions are the options of `isolate run` (isolate.RunConfig: the
// controller's parameters and the command's own). Each is a flag
// (structFlags: its YAML key with dashes, or its flag tag) and a key of the
// --config file.
type isolateOptions = isolate.RunConfig

// defaultIsolateOptions are the flags' defaults.
func defaultIsolateOptions() isolateOptions {
	return isolateOptions{Params: isolate.DefaultParams(), Metrics: "127.0.0.1:9477", StateDir: isolateStateDir, KubeletDir: isolate.DefaultKubeletDir}
}

func newIsolateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "isolate",
		Short: "Real-time CPU and interrupt isolation controller for Docker containers and Kubernetes pods",
		Long: `ctrperf isolate keeps quiet containers fast when a neighbour gets hot.

Containers opt in with the label ctrperf.isolate=true (or --all) and may state
the CPUs they are entitled to with ctrperf.isolate.cpus=N. Every interval
(100 ms) the controller reads each container's cgroup CPU use and CPU pressure
(files only: membership comes from Docker events and a relist every 5 s) and:

  - a container that uses >= --hot-threshold of its entitlement (its label,
    else online CPUs / managed containers) for --hot-after samples turns hot;
    after --cool-after calm samples it is normal again;
  - policy "shield" (default) demotes a hot container: the lowest weight
    (cpu.shares=2; any normal task wins the CPU from it), or with
    --demote-class idle cpu.idle=1 (preempted at once, but the kernel may
    queue its threads on one CPU while another idles; kernel >= 5.15). It
    keeps every CPU, so it still uses all idle time. Normal containers get
    dedicated CPUs only where there are enough for all of them;
  - policy "paper" (the IBM paper) pins normal containers to dedicated CPUs and
    releases a hot one to all CPUs; "strict" confines a hot one to the shared
    pool. Both refuse to pin (and say why in the log and status) rather than
    put two normal containers on one CPU; --demote adds the demotion;
  - --stall-gate demotes only while another managed container stalls for CPU
    (cgroup cpu.pressure);
  - steers the network devices' IRQs (chosen by driver; --irq-pattern
    overrides) onto the shared pool, rotated every --irq-rotate, each write
    verified through effective_affinity (IRQs the kernel will not move are
    skipped, logged and retried later);
  - sets the RPS mask of each managed container's host-side veth to the pool.

Everything it changes (cpu.idle and weights, cpusets, IRQ affinity, RPS) is
checkpointed with its original value before the write (fsync'd), re-read
(a value Docker wrote on restart or update becomes the new original),
restored on SIGINT, SIGTERM or SIGHUP (a closed terminal); after a crash,
the next start (or 'ctrperf isolate restore') puts the originals back first.
One controller at a time.

On Kubernetes (--cri-socket; 'isolate manifest' prints it as a DaemonSet)
the pods labelled ctrperf.isolate: "true" are managed, from the node's CRI
runtime; a pod's entitlement is its request-weighted share of the CPUs
(what cpu.shares gives it under contention, at least its request), and on
a node whose kubelet runs the static CPU manager no cpuset is written
(demote only). 'isolate status --kubeconfig' shows every node.

Metrics (--metrics, 127.0.0.1:9477 by default; :PORT binds loopback, any
other host is served with a warning): ctrperf_isolate_container_{usage_cpus,
entitlement_cpus,hot,demoted,cpus,stall_ratio}{container,name},
ctrperf_isolate_decisions_total{kind}, ctrperf_isolate_write_failures_total,
ctrperf_isolate_loop_duration_seconds, ctrperf_isolate_step_cpu_seconds_total,
ctrperf_isolate_reaction_seconds (a container's saturation to the first
change applied to it), ctrperf_build_info{version}, go_build_info, process_*
and go_*. A Grafana dashboard for them is contrib/grafana/ctrperf-isolate.json.`,
	}
	cmd.AddCommand(newIsolateRunCmd(startIsolate), newIsolateStatusCmd(), newIsolateRestoreCmd(), newIsolateManifestCmd())
	return cmd
}

// controller is a running isolate controller (*isolate.Running).
type controller interface {
	Stop(ctx context.Context) error
}

// isolateStarter starts the controller (tests give a fake).
type isolateStarter func(ctx context.Context, cli client.APIClient, o isolate.Options) (controller, error)

func startIsolate(ctx context.Context, cli client.APIClient, o isolate.Options) (controller, error) {
	if o.CRISocket != "" {
		return startIsolateCRI(ctx, o)
	}
	run, err := isolate.Start(ctx, cli, o)
	if err != nil {
		return nil, err
	}
	return run, nil
}

func newIsolateRunCmd(start isolateStarter) *cobra.Command {
	o := defaultIsolateOptions()
	var configFile string
	var fields map[string][]int // each flag's field of o
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controller until SIGINT, SIGTERM or SIGHUP, then restore everything",
		Long: `Run the controller until Ctrl-C (SIGINT), SIGTERM or SIGHUP (the terminal
was closed), then restore every CPU class, cpuset, IRQ affinity and RPS mask
it changed. A second signal does not skip the restore: ctrperf restores
first and then exits (status 130); further signals do not cut it short. The
decision log on stdout is a copy: when the terminal is gone its writes are
dropped and the controller goes on (the log file keeps every decision).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseRemoteDocker("isolate run"); err != nil && o.CRISocket == "" {
				return err
			}
			if configFile != "" {
				if err := loadIsolateConfig(configFile, &o, cmd.Flags(), fields); err != nil {
					return err
				}
			}
			return runIsolate(cmd, o, start)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "YAML file with any of these options (flags given on the command line win)")
	fields = structFlags(f, &o)
	return cmd
}

func loadIsolateConfig(path string, o *isolateOptions, flags *pflag.FlagSet, fields map[string][]int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	// The file's keys replace the flag defaults; keys it leaves out keep
	// them (irq and rps stay on unless the file turns them off).
	merged, err := isolate.DecodeRunConfig(b, *o)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	overrideFlags(flags, fields, &merged, *o) // flags given explicitly win over the file
	*o = merged
	return nil
}

func runIsolate(cmd *cobra.Command, o isolateOptions, start isolateStarter) error {
	out := cmd.OutOrStdout()
	params := o.Params
	if o.CRISocket != "" && !params.DemoteOnly {
		policy, err := isolate.KubeletCPUManagerPolicy(o.KubeletDir)
		if err != nil {
			return fmt.Errorf("kubelet's CPU manager policy (--kubelet-dir %s): %w", o.KubeletDir, err)
		}
		if policy == "static" {
			params.DemoteOnly = true
			fmt.Fprintf(out, "ctrperf isolate: kubelet's CPU manager policy is static (%s): the cpusets are kubelet's, hot pods are only demoted\n", o.KubeletDir)
		}
	}
	if err := params.ValidateDecoded(); err != nil {
		return err
	}
	metricsAddr, warning, err := metricsListenAddr(o.Metrics)
	if err != nil {
		return exitcode.AsUsage(err)
	}
	if warning != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", warning)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	// A second signal restores before the process exits.
	force := &lifecycle.Stack{}
	ctx, stop := lifecycle.SignalContext(cmd.Context(), lifecycle.WithForceCleanup(force, 30*time.Second))
	defer stop()

	reg := prometheus.NewRegistry()
	var metricsReg prometheus.Registerer = reg
	if node := os.Getenv("NODE_NAME"); node != "" && o.CRISocket != "" {
		// A node's controller (the DaemonSet sets NODE_NAME): every series
		// says which node, for the dashboard's node variable.
		metricsReg = prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, reg)
	}
	run, err := start(ctx, cli, isolate.Options{Params: params, All: o.All, Labels: o.Labels, DryRun: o.DryRun,
		StateDir: o.StateDir, LogPath: o.Log, Log: out, Metrics: registerIsolateMetrics(metricsReg), CRISocket: o.CRISocket,
		Warn: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "warning:", s) }})
	if err != nil {
		return err
	}
	force.Push("restore what the controller changed", run.Stop)
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			_ = run.Stop(context.Background())
			return fmt.Errorf("metrics listener %s: %w", metricsAddr, err)
		}
		fmt.Fprintf(out, "ctrperf isolate: metrics on http://%s/metrics\n", ln.Addr())
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/status", statusHandler(o.StateDir))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	fmt.Fprintf(out, "ctrperf isolate: policy %s, interval %s, dry-run %v; Ctrl-C restores everything\n", params.Policy, o.Interval, o.DryRun)
	<-ctx.Done()
	restoreCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run.Stop(restoreCtx); err != nil {
		return err
	}
	fmt.Fprintln(out, "ctrperf isolate: stopped, every CPU class, cpuset, IRQ affinity and RPS mask restored")
	return nil
}

// metricsListenAddr is where --metrics s listens: "" (off), HOST:PORT as
// given, or loopback for :PORT and PORT. A host that is not loopback
// (0.0.0.0, [::], an interface address or a name) is allowed, since a
// Prometheus on another machine may need it, with a warning to print.
func metricsListenAddr(s string) (addr, warning string, err error) {
	if s == "" {
		return "", "", nil
	}
	host, port := "", s
	if strings.Contains(s, ":") {
		if host, port, err = net.SplitHostPort(s); err != nil {
			return "", "", fmt.Errorf("--metrics %q: want HOST:PORT, :PORT or PORT (%v)", s, err)
		}
	}
	if p, err := strconv.Atoi(port); err != nil && host == "" && !strings.Contains(s, ":") {
		return "", "", fmt.Errorf("--metrics %q: want HOST:PORT, :PORT or PORT", s)
	} else if err != nil || p < 0 || p > 65535 {
		return "", "", fmt.Errorf("--metrics %q: port %q is not a number from 0 to 65535", s, port)
	}
	switch ip := net.ParseIP(host); {
	case host == "":
		return net.JoinHostPort("127.0.0.1", port), "", nil
	case host == "localhost" || ip.IsLoopback():
		return net.JoinHostPort(host, port), "", nil
	case ip != nil && ip.IsUnspecified():
		return net.JoinHostPort(host, port), fmt.Sprintf("--metrics %s listens on every interface: anyone who can reach this machine reads the controller's metrics (container names and CPU use)", s), nil
	default:
		return net.JoinHostPort(host, port), fmt.Sprintf("--metrics %s is not a loopback address: anyone who can reach it reads the controller's metrics (container names and CPU use)", s), nil
	}
}

// registerIsolateMetrics registers what `isolate run --metrics` serves:
// the controller's metrics (ctrperf_isolate_*), ctrperf_build_info
// {version,goversion}, go_build_info, and the process_* and go_* metrics of
// the controller's own process.
func registerIsolateMetrics(reg prometheus.Registerer) *isolate.Metrics {
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctrperf_build_info",
		Help:        "Always 1; the labels say which ctrperf runs.",
		ConstLabels: prometheus.Labels{"version": version.Version, "goversion": runtime.Version()}})
	build.Set(1)
	reg.MustRegister(build, collectors.NewBuildInfoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return isolate.NewMetrics(reg)
}

func newIsolateStatusCmd() *cobra.Command {
	var stateDir, kubeconfig, namespace string
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running controller's placement table (--kubeconfig: every node's)",
		Long: `Show the running controller's placement table: each managed container's
CPU use against its entitlement, its CPUs, whether it is hot or demoted and
why, and the IRQs steered.

With --kubeconfig, the same for every node of a cluster where the controller
runs as the DaemonSet of 'ctrperf isolate manifest': each pod's /status is
read through the API server's pod proxy (it needs get on pods/proxy in that
namespace), with each node's last decisions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig != "" {
				return fleetStatus(cmd, kubeconfig, namespace, format.JSON())
			}
			b, err := os.ReadFile(filepath.Join(stateDir, "status.json"))
			if errors.Is(err, os.ErrNotExist) {
				return errors.New("no controller is running (no " + filepath.Join(stateDir, "status.json") + ")")
			}
			if err != nil {
				return err
			}
			var s isolate.Status
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("parse status %s: %w", filepath.Join(stateDir, "status.json"), err)
			}
			if format.JSON() {
				return writeJSONBytes(cmd.OutOrStdout(), b)
			}
			return printIsolateStatus(cmd.OutOrStdout(), s)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", isolateStateDir, "the controller's state directory")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "show every node's controller of this cluster (the DaemonSet of 'isolate manifest')")
	cmd.Flags().StringVar(&namespace, "namespace", "ctrperf-isolate", "with --kubeconfig: the DaemonSet's namespace")
	format = addFormatFlags(cmd, formatTable, formatJSON)
	return cmd
}

// printIsolateStatus prints one controller's placement table.
func printIsolateStatus(out io.Writer, s isolate.Status) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	mode := ""
	if s.DemoteOnly {
		mode = ", demote only (the cpusets are kubelet's)"
	}
	fmt.Fprintf(w, "policy %s%s (pid %d, %s), shared pool %s, control steps used %.2f CPU s\n", s.Policy, mode, s.PID, s.Time.Format(time.RFC3339), s.SharedPool, s.StepCPUSeconds)
	if s.PinRefused != "" {
		fmt.Fprintf(w, "not pinning: %s\n", s.PinRefused)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CONTAINER\tUSAGE\tENTITLED\tSTALL\tCPUS\tHOT\tDEMOTED\tREASON")
	for _, c := range s.Containers {
		cpus := c.CPUs
		if cpus == "" {
			cpus = "own"
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.1f%%\t%s\t%v\t%v\t%s\n", c.Name, c.Usage, c.Entitlement, 100*c.Stall, cpus, c.Hot, c.Demoted, c.Reason)
	}
	for irq, cpu := range s.IRQs {
		fmt.Fprintf(w, "IRQ %d\t\t\t\t%d\t\t\t\n", irq, cpu)
	}
	for irq, why := range s.Skipped {
		fmt.Fprintf(w, "IRQ %d\t\t\t\tskipped\t\t\t%s\n", irq, why)
	}
	return w.Flush()
}

func newIsolateRestoreCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Put back everything a crashed controller changed, from its checkpoint",
		Long: `Puts back every cpuset, CPU class, IRQ affinity and RPS mask a crashed
controller changed, from the checkpoint in its state directory, and removes
the checkpoint. A value that no longer holds what the controller wrote
(changed since by docker update, irqbalance or an operator) is left alone
and said so; a checkpoint of a release before this one does not record
what was written, and all its values are put back. It refuses while a
controller is live: the controller's owner record in the state directory
(pid, start time, command) is held by a lock for as long as it runs, the
same rule 'ctrperf clean' uses for bench runs; stop that controller
instead (it restores on exit). IRQ affinities and RPS masks are written
under the machine's steering lock (/run/ctrperf/isolate-steering), so it
also refuses while another controller steers them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return err
			}
			defer cli.Close()
			n := 0
			out := cmd.OutOrStdout()
			restored, err := isolate.RestoreStateDir(cmd.Context(), cli, stateDir, kernel.DefaultFS(), func(e isolate.Event) {
				switch e.Kind {
				case "restore":
					n++
				case "left_alone":
					fmt.Fprintf(out, "left alone: %s\n", e.Reason)
				}
			})
			if err != nil {
				return err
			}
			if !restored {
				fmt.Fprintln(out, "nothing to restore")
				return nil
			}
			fmt.Fprintf(out, "restored %d values from %s\n", n, filepath.Join(stateDir, "checkpoint.json"))
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", isolateStateDir, "the controller's state directory")
	return cmd
}

// statusHandler serves the controller's status.json (what `isolate status`
// prints), for `isolate status --kubeconfig` through the API server's pod
// proxy.
func statusHandler(stateDir string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		b, err := os.ReadFile(filepath.Join(stateDir, "status.json"))
		if err != nil {
			http.Error(w, "no status yet: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}
