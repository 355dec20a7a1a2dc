package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/engine"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/observe"
	"ctrperf/internal/results"
)

type observeOptions struct {
	interval   time.Duration
	duration   time.Duration
	json       bool
	containers bool
	devices    []string
	partitions bool
	procRoot   string
	sysRoot    string
	cgroupRoot string
}

func newObserveCmd() *cobra.Command {
	var o observeOptions
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Sample disks, CPUs, interrupts, processes and containers live",
		Long: `ctrperf observe runs the samplers that ctrperf bench records during every
run and prints, every interval, an mpstat-like all-CPU line, iostat -x-like
device lines and the process groups of the container infrastructure
(dockerd, containerd, containerd-shim, docker-proxy) and of ctrperf itself.
--containers adds one line per running Docker container (cgroup CPU,
throttling, memory, block I/O). --format json (or --json) prints one JSON
sample per line instead (JSON lines, each with schema_version and
ctrperf_version). --devices names devices of /proc/diskstats; a name that is
not there is refused with the ones that are.
It runs until --duration has passed or Ctrl-C, then prints mean and max.
SIGTERM and SIGHUP (the terminal was closed) stop it like Ctrl-C; a second
signal exits at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseRemoteDocker("observe"); err != nil {
				return err
			}
			o.json = format.JSON()
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			return runObserve(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.interval, "interval", time.Second, "sampling interval")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	format = addFormatFlags(cmd, formatTable, formatJSON)
	f.BoolVar(&o.containers, "containers", false, "add per-container lines (running Docker containers)")
	f.StringSliceVar(&o.devices, "devices", nil, "only these block devices, e.g. vda,loop0 (default: whole devices with I/O)")
	f.BoolVar(&o.partitions, "partitions", false, "include partitions")
	f.StringVar(&o.procRoot, "proc-root", kernel.ProcMount, "proc mount (testing)")
	f.StringVar(&o.sysRoot, "sys-root", kernel.SysMount, "sys mount (testing)")
	f.StringVar(&o.cgroupRoot, "cgroup-root", kernel.CgroupMount, "cgroup root (testing)")
	for _, h := range []string{"proc-root", "sys-root", "cgroup-root"} {
		_ = f.MarkHidden(h)
	}
	return cmd
}

func runObserve(ctx context.Context, stdout, stderr io.Writer, o observeOptions) error {
	if o.interval <= 0 {
		return exitcode.Usagef("--interval must be positive, got %s", o.interval)
	}
	kfs := kernel.NewFS(kernel.Roots{Proc: o.procRoot, Sys: o.sysRoot, Cgroup: o.cgroupRoot})
	if len(o.devices) > 0 {
		known, err := observe.Devices(kfs)
		if err != nil {
			return err
		}
		var unknown []string
		for _, d := range o.devices {
			if !slices.Contains(known, d) {
				unknown = append(unknown, d)
			}
		}
		if len(unknown) > 0 {
			return exitcode.Usagef("--devices: no block device %s here (devices: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
		}
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	var (
		outMu  sync.Mutex
		outErr error
	)
	print := func(s results.Sample) {
		outMu.Lock()
		defer outMu.Unlock()
		if outErr != nil {
			return
		}
		if o.json {
			outErr = writeJSONLine(stdout, s)
		} else {
			outErr = observe.WriteText(stdout, s)
		}
	}
	obs := observe.New(
		observe.WithKernel(kfs),
		observe.WithInterval(o.interval),
		observe.WithDevices(o.devices),
		observe.WithPartitions(o.partitions),
		observe.WithOnSample(print),
		// Live, containers come and go between two refreshes of the list.
		observe.WithContainersMayGo(true),
	)
	if err := obs.Start(ctx); err != nil {
		return err
	}
	if o.containers {
		go followContainers(ctx, stderr, obs, kfs, 5*o.interval)
	}
	<-ctx.Done()
	series := obs.Stop()
	outMu.Lock()
	defer outMu.Unlock()
	if outErr != nil {
		return fmt.Errorf("write samples: %w", outErr)
	}
	if !o.json {
		fmt.Fprintln(stdout)
		if err := observe.WriteSummaryText(stdout, results.Summarize(series)); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
	} else {
		for _, k := range slices.Sorted(maps.Keys(series.Unavailable)) {
			fmt.Fprintf(stderr, "ctrperf observe: %s unavailable: %s\n", k, series.Unavailable[k])
		}
	}
	return nil
}

// followContainers keeps the observer's container list in step with the
// running containers of the engine DOCKER_HOST (or the default socket) names.
// Without an engine it says so once and the other samplers carry on.
func followContainers(ctx context.Context, stderr io.Writer, obs *observe.Observer, kfs kernel.FS, every time.Duration) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintf(stderr, "ctrperf observe: no Docker client (%v); continuing without containers\n", err)
		return
	}
	defer cli.Close()
	warned := false
	for {
		cs, err := runningContainers(ctx, cli, kfs)
		switch {
		case err != nil && ctx.Err() == nil && !warned:
			fmt.Fprintf(stderr, "ctrperf observe: no Docker engine answers (%v); continuing without containers\n", err)
			warned = true
		case err == nil:
			obs.SetContainers(cs)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// runningContainers lists running containers with the cgroup of their init
// process, which is right for every cgroup driver and version.
func runningContainers(ctx context.Context, cli *client.Client, kfs kernel.FS) ([]observe.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []observe.Container
	for _, c := range list.Items {
		res, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		info := res.Container
		if err != nil || info.State == nil || info.State.Pid == 0 {
			continue // gone since the list
		}
		path, err := engine.CgroupPath(kfs, info.State.Pid)
		if err != nil {
			continue
		}
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, observe.Container{Name: name, CgroupPath: path})
	}
	return out, nil
}
