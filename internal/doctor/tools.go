package doctor

import "context"

// wantedTools are the programs ctrperf wraps, with where they come from.
var wantedTools = []Tool{
	{Name: "dockerd", Package: "docker.io", For: "docker runtime and private engines"},
	{Name: "iptables", Package: "iptables", For: "private engines (published ports)"},
	{Name: "fio", Package: "fio", For: "fileio workload"},
	{Name: "sysbench", Package: "sysbench", For: "oltp and cpu workloads"},
	{Name: "stress-ng", Package: "stress-ng", For: "noisy neighbours (isolate), exec fork and ctxsw workloads"},
	{Name: "bonnie++", Package: "bonnie++", For: "bonnie workload on the host"},
	{Name: "memcached", Package: "memcached", For: "kv workload on the host"},
	{Name: "mariadbd", Package: "mariadb-server", For: "oltp and web workloads on the host"},
	{Name: "wrk", Package: "wrk", For: "comparison load generator"},
	{Name: "debootstrap", Package: "debootstrap", For: "Debian base image build"},
	{Name: "chromium", Package: "chromium", For: "HTML report screenshots"},
	{Name: "mkfs.btrfs", Package: "btrfs-progs", For: "loop-btrfs data roots"},
	{Name: "mkfs.xfs", Package: "xfsprogs", For: "loop-xfs data roots"},
}

func collectTools(_ context.Context, o options, f *Facts) error {
	for _, t := range wantedTools {
		t.Path, _ = o.lookPath(t.Name)
		f.Tools = append(f.Tools, t)
	}
	return nil
}
