package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/docker/docker/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"ctrperf/internal/isolate"
)

const isolateStateDir = isolate.DefaultStateDir

// isolateOptions are the flags (and the optional YAML config) of `isolate run`.
type isolateOptions struct {
	Policy           string        `yaml:"policy"`
	Interval         time.Duration `yaml:"interval"`
	All              bool          `yaml:"all"`
	Labels           []string      `yaml:"labels"`
	CPUsPerContainer int           `yaml:"cpus_per_container"`
	MinShared        int           `yaml:"min_shared"`
	HotThreshold     float64       `yaml:"hot_threshold"`
	CoolThreshold    float64       `yaml:"cool_threshold"`
	HotAfter         int           `yaml:"hot_after"`
	CoolAfter        int           `yaml:"cool_after"`
	IRQ              bool          `yaml:"irq"`
	IRQPattern       string        `yaml:"irq_pattern"`
	IRQRotate        time.Duration `yaml:"irq_rotate"`
	RPS              bool          `yaml:"rps"`
	DryRun           bool          `yaml:"dry_run"`
	Metrics          string        `yaml:"metrics"`
	Log              string        `yaml:"log"`
	StateDir         string        `yaml:"state_dir"`
}

func newIsolateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "isolate",
		Short: "Real-time CPU and interrupt isolation controller for Docker containers",
		Long: `ctrperf isolate keeps quiet containers fast when a neighbour gets hot.

Containers opt in with the label ctrperf.isolate=true (or --all) and may ask
for a number of dedicated CPUs with ctrperf.isolate.cpus=N. Every interval the
controller samples each container's cgroup CPU use and:

  - gives every normal container dedicated CPUs of its own;
  - when a container saturates its CPUs for --hot-after samples it turns hot:
    policy "paper" releases it to all CPUs (the IBM paper's choice), policy
    "strict" confines it to the shared pool (CPUs no normal container owns);
    after --cool-after calm samples it gets dedicated CPUs again;
  - steers network IRQs (by name, --irq-pattern) onto the shared pool, rotated
    round-robin every --irq-rotate, each write verified through
    effective_affinity (IRQs the kernel will not move are skipped and logged);
  - sets the RPS mask of each managed container's host-side veth to the pool.

Everything it changes is checkpointed with its original value and restored on
SIGINT/SIGTERM; after a crash, the next start (or 'ctrperf isolate restore')
puts the originals back first. One controller at a time.`,
	}
	cmd.AddCommand(newIsolateRunCmd(), newIsolateStatusCmd(), newIsolateRestoreCmd())
	return cmd
}

func newIsolateRunCmd() *cobra.Command {
	o := isolateOptions{}
	d := isolate.DefaultParams()
	var configFile string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controller until SIGINT/SIGTERM, then restore everything",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				if err := loadIsolateConfig(configFile, &o, cmd); err != nil {
					return err
				}
			}
			return runIsolate(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "YAML file with any of these options (flags given on the command line win)")
	f.StringVar(&o.Policy, "policy", string(d.Policy), "where a hot container goes: paper (all CPUs) or strict (shared pool only)")
	f.DurationVar(&o.Interval, "interval", time.Second, "sampling interval")
	f.BoolVar(&o.All, "all", false, "manage every running container, not only those labelled ctrperf.isolate")
	f.StringArrayVar(&o.Labels, "label", nil, "only manage containers that also carry this label (key or key=value; repeatable)")
	f.IntVar(&o.CPUsPerContainer, "cpus-per-container", d.CPUsPerContainer, "dedicated CPUs per normal container (label ctrperf.isolate.cpus overrides)")
	f.IntVar(&o.MinShared, "min-shared", d.MinShared, "CPUs always kept in the shared pool")
	f.Float64Var(&o.HotThreshold, "hot-threshold", d.HotThreshold, "fraction of its dedicated CPUs a container must use to count as saturated")
	f.Float64Var(&o.CoolThreshold, "cool-threshold", d.CoolThreshold, "fraction of its CPUs below which a hot container counts as calm")
	f.IntVar(&o.HotAfter, "hot-after", d.HotAfter, "consecutive saturated samples before a container turns hot")
	f.IntVar(&o.CoolAfter, "cool-after", d.CoolAfter, "consecutive calm samples before it turns normal again")
	f.BoolVar(&o.IRQ, "irq", true, "steer network IRQs onto the shared pool")
	f.StringVar(&o.IRQPattern, "irq-pattern", isolate.DefaultIRQPattern, "regexp on /proc/interrupts names selecting the IRQs to steer")
	f.DurationVar(&o.IRQRotate, "irq-rotate", 10*time.Second, "rotate the IRQs round-robin over the pool this often")
	f.BoolVar(&o.RPS, "rps", true, "set the RPS mask of managed containers' host veths to the shared pool")
	f.BoolVar(&o.DryRun, "dry-run", false, "decide and log, change nothing")
	f.StringVar(&o.Metrics, "metrics", "127.0.0.1:9477", "serve Prometheus metrics on this loopback address (empty: off)")
	f.StringVar(&o.Log, "log", "", "decision log, JSON lines (default STATE_DIR/decisions.jsonl)")
	f.StringVar(&o.StateDir, "state-dir", isolateStateDir, "where the lock, checkpoint and status live")
	return cmd
}

func loadIsolateConfig(path string, o *isolateOptions, cmd *cobra.Command) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var fromFile isolateOptions
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fromFile); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	// Flags given explicitly win over the file.
	merged := fromFile
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "policy":
			merged.Policy = o.Policy
		case "interval":
			merged.Interval = o.Interval
		case "all":
			merged.All = o.All
		case "label":
			merged.Labels = o.Labels
		case "cpus-per-container":
			merged.CPUsPerContainer = o.CPUsPerContainer
		case "min-shared":
			merged.MinShared = o.MinShared
		case "hot-threshold":
			merged.HotThreshold = o.HotThreshold
		case "cool-threshold":
			merged.CoolThreshold = o.CoolThreshold
		case "hot-after":
			merged.HotAfter = o.HotAfter
		case "cool-after":
			merged.CoolAfter = o.CoolAfter
		case "irq":
			merged.IRQ = o.IRQ
		case "irq-pattern":
			merged.IRQPattern = o.IRQPattern
		case "irq-rotate":
			merged.IRQRotate = o.IRQRotate
		case "rps":
			merged.RPS = o.RPS
		case "dry-run":
			merged.DryRun = o.DryRun
		case "metrics":
			merged.Metrics = o.Metrics
		case "log":
			merged.Log = o.Log
		case "state-dir":
			merged.StateDir = o.StateDir
		}
	})
	// Unset file values keep the flag defaults.
	def := *o
	if merged.Policy == "" {
		merged.Policy = def.Policy
	}
	if merged.Interval == 0 {
		merged.Interval = def.Interval
	}
	if merged.IRQPattern == "" {
		merged.IRQPattern = def.IRQPattern
	}
	if merged.IRQRotate == 0 {
		merged.IRQRotate = def.IRQRotate
	}
	if merged.StateDir == "" {
		merged.StateDir = def.StateDir
	}
	if merged.Metrics == "" {
		merged.Metrics = def.Metrics
	}
	*o = merged
	return nil
}

func runIsolate(cmd *cobra.Command, o isolateOptions) error {
	out := cmd.OutOrStdout()
	params := isolate.Params{Policy: isolate.Policy(o.Policy), CPUsPerContainer: o.CPUsPerContainer, MinShared: o.MinShared,
		HotThreshold: o.HotThreshold, CoolThreshold: o.CoolThreshold, HotAfter: o.HotAfter, CoolAfter: o.CoolAfter}
	if err := params.Validate(); err != nil {
		return err
	}
	if o.Metrics != "" {
		host, _, err := net.SplitHostPort(o.Metrics)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("--metrics %q: want a loopback address such as 127.0.0.1:9477", o.Metrics)
		}
	}
	if _, err := regexp.Compile(o.IRQPattern); err != nil {
		return fmt.Errorf("--irq-pattern %q: %w", o.IRQPattern, err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	run, err := isolate.Start(ctx, cli, isolate.Options{Params: params, Interval: o.Interval, All: o.All, Labels: o.Labels,
		IRQ: o.IRQ, IRQPattern: o.IRQPattern, IRQRotate: o.IRQRotate, RPS: o.RPS, DryRun: o.DryRun,
		StateDir: o.StateDir, LogPath: o.Log, Log: out, Metrics: isolate.NewMetrics(reg),
		Warn: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "warning:", s) }})
	if err != nil {
		return err
	}
	if o.Metrics != "" {
		ln, err := net.Listen("tcp", o.Metrics)
		if err != nil {
			_ = run.Stop(context.Background())
			return fmt.Errorf("metrics listener %s: %w", o.Metrics, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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
	fmt.Fprintln(out, "ctrperf isolate: stopped, every cpuset, IRQ affinity and RPS mask restored")
	return nil
}

func newIsolateStatusCmd() *cobra.Command {
	var stateDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running controller's placement table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(filepath.Join(stateDir, "status.json"))
			if errors.Is(err, os.ErrNotExist) {
				return &exitError{code: 1, msg: "no controller is running (no " + filepath.Join(stateDir, "status.json") + ")"}
			}
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(b)
				return err
			}
			var s isolate.Status
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("parse status: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "policy %s (pid %d, %s), shared pool %s, oversubscribed %v\n\n", s.Policy, s.PID, s.Time.Format(time.RFC3339), s.SharedPool, s.Oversub)
			fmt.Fprintln(w, "CONTAINER\tCPUS\tHOT\tSHARED\tREASON")
			for _, c := range s.Containers {
				fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%s\n", c.Name, c.CPUs, c.Hot, c.Shared, c.Reason)
			}
			for irq, cpu := range s.IRQs {
				fmt.Fprintf(w, "IRQ %d\t%d\t\t\t\n", irq, cpu)
			}
			for irq, why := range s.Skipped {
				fmt.Fprintf(w, "IRQ %d\tskipped\t\t\t%s\n", irq, why)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", isolateStateDir, "the controller's state directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func newIsolateRestoreCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Put back everything a crashed controller changed, from its checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lock, err := isolate.Lock(filepath.Join(stateDir, "lock"))
			if err != nil {
				return err
			}
			defer lock.Close()
			path := filepath.Join(stateDir, "checkpoint.json")
			cp, err := isolate.LoadCheckpoint(path)
			if err != nil {
				return err
			}
			if cp == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to restore")
				return nil
			}
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return err
			}
			v2 := isolate.CgroupV2Only("/sys/fs/cgroup")
			top, err := isolate.DiscoverTopology("/sys")
			if err != nil {
				return err
			}
			n := 0
			err = isolate.RestoreCheckpoint(cmd.Context(), cp,
				isolate.CgroupCPUSet{Root: "/sys/fs/cgroup", V2: v2, Path: isolate.CgroupPathOf(cli, "/proc", v2)},
				isolate.ProcIRQ{Root: "/proc"}, isolate.SysRPS{Root: "/sys", NCPU: len(top.CPUs)},
				func(isolate.Event) { n++ })
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			if err := os.Remove(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d values from %s\n", n, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", isolateStateDir, "the controller's state directory")
	return cmd
}
