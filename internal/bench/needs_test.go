package bench

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/selfbin"
)

func builtinPlan(t *testing.T, name string) *plan.Plan {
	t.Helper()
	p, _, err := OpenPlan(name, plan.Options{})
	if err != nil {
		t.Fatalf("plan %s: %v", name, err)
	}
	return p
}

// TestPlanImages: the images a plan deploys, and none it does not.
func TestPlanImages(t *testing.T) {
	tests := []struct {
		plan string
		want []string
	}{
		{"smoke", []string{"ctrperf/ticketd:latest"}},                                                                     // SQLite: FROM scratch, no Debian base
		{"nested", []string{"ctrperf/debian-base:latest"}},                                                                // exec in the base, and the nested engine's own
		{"web-topology", []string{"ctrperf/web-combined:latest", "ctrperf/ticketd:latest", "ctrperf/debian-base:latest"}}, // combined and split MariaDB
		{"vm", []string{"ctrperf/debian-base:latest"}},                                                                    // its docker configuration; the vm one runs no image
	}
	for _, tc := range tests {
		t.Run(tc.plan, func(t *testing.T) {
			got, err := PlanImages(builtinPlan(t, tc.plan))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("PlanImages(%s) = %v, want %v", tc.plan, got, want)
			}
		})
	}
}

// machine is a fake machine: the commands it has, its images' states.
func machine(commands []string, images map[string]image.State) Machine {
	tools := map[string]string{}
	for _, c := range commands {
		tools[c] = "/usr/bin/" + c
	}
	return Machine{
		LookPath: func(name string) (string, error) {
			if p, ok := tools[name]; ok {
				return p, nil
			}
			return "", errors.New("not found")
		},
		Daemon: daemon.HostFacts{Tools: tools, LoopControl: true, NativeFS: "ext4", DeviceMapper: false,
			Filesystems: map[string]bool{"ext4": true, "xfs": true, "btrfs": true, "overlay": true}},
		Images: images,
		Exists: func(string) bool { return false },
	}
}

var everyCommand = []string{"dockerd", "docker", "iptables", "iptables-save", "losetup", "mkfs.ext4", "mkfs.xfs", "mkfs.btrfs",
	"fio", "sysbench", "stress-ng", "memcached", "bonnie++", "mariadbd", "mariadb-install-db", "debootstrap", "wrk", "ip",
	"sh", "date", "sort", "od", "grep", "tee", "wc", "nproc", // the exec workload's shell tools
	"podman"}

func without(all []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(drop, s) })
}

var currentImages = map[string]image.State{"ctrperf/ticketd:latest": image.StateCurrent,
	"ctrperf/debian-base:latest": image.StateCurrent, "ctrperf/web-combined:latest": image.StateCurrent}

func withState(ref string, st image.State) map[string]image.State {
	m := maps.Clone(currentImages)
	m[ref] = st
	return m
}

func TestPlanLacks(t *testing.T) {
	tests := []struct {
		desc, plan    string
		m             Machine
		packages      []string
		images        []string
		other         string // a substring of one Other lack (and its fix)
		ready         bool
		wantUnchecked string
	}{
		{"smoke on a machine with everything", "smoke", machine(everyCommand, currentImages), nil, nil, "", true, ""},
		{"smoke on a bare machine: the engine's two packages", "smoke", machine(nil, currentImages),
			[]string{"docker.io", "iptables"}, nil, "", false, ""},
		{"smoke before its image is built: ticketd, and no debootstrap", "smoke",
			machine(without(everyCommand, "debootstrap"), withState("ctrperf/ticketd:latest", image.StateMissing)),
			nil, []string{"ctrperf/ticketd:latest"}, "", true, ""},
		{"smoke with no engine answering: images unchecked", "smoke", machine(everyCommand, nil),
			nil, nil, "", true, "images (no Docker engine answers)"},
		{"web-seed000 on the host without MariaDB", "web-seed000", machine(without(everyCommand, "mariadbd", "mariadb-install-db"), currentImages),
			[]string{"mariadb-server"}, nil, "", false, ""},
		{"nested without its base and without debootstrap", "nested",
			machine(without(everyCommand, "debootstrap"), withState("ctrperf/debian-base:latest", image.StateMissing)),
			[]string{"debootstrap"}, []string{"ctrperf/debian-base:latest"}, "", false, ""},
		{"storage-fs without mkfs.xfs", "storage-fs", machine(without(everyCommand, "mkfs.xfs"), currentImages),
			[]string{"xfsprogs"}, nil, "", false, ""},
		{"storage: a loop-btrfs data root without mkfs.btrfs", "storage", machine(without(everyCommand, "mkfs.btrfs"), currentImages),
			[]string{"btrfs-progs"}, nil, "", false, ""},
		{"network without podman: runtime podman's package, from its trait", "network", machine(without(everyCommand, "podman"), currentImages),
			[]string{"podman"}, nil, "", false, ""},
		{"kube-cpu with no cluster", "kube-cpu", machine(everyCommand, currentImages),
			nil, nil, "make kube-up", false, ""},
		{"kube-cpu in a program built without runtime kubernetes", "kube-cpu", machine(everyCommand, currentImages),
			nil, nil, "built without it", false, ""},
		{"lab-smoke before make lab-up", "lab-smoke", machine(everyCommand, currentImages),
			nil, nil, "make lab-up", false, ""},
		{"vm: no KVM guest here, emulated ones run", "vm", withVM(machine(everyCommand, currentImages), "KVM here is PVM", ""), nil, nil,
			"runtime vm with accel kvm (configuration kvm-guest) none here: KVM here is PVM", false, ""},
		{"vm: no QEMU either", "vm", withVM(machine(everyCommand, currentImages), "KVM here is PVM", "qemu-system-x86_64 not installed"), nil, nil,
			"runtime vm with accel tcg (configuration tcg-guest) none here: qemu-system-x86_64 not installed", false, ""},
		{"vm: a machine whose KVM boots a stock guest", "vm", machine(everyCommand, currentImages), nil, nil, "", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// The web workload's host runtime runs ctrperf itself.
			t.Setenv(selfbin.Env, "/bin/true")
			if tc.other == "make kube-up" {
				withOpeners(t, map[engine.Runtime]RuntimeOpener{plan.RuntimeKubernetes: func(context.Context, engine.EngineSpec, OpenOptions) (engine.Engine, engine.Info, error) {
					return nil, engine.Info{}, errors.New("not called")
				}})
			}
			p := builtinPlan(t, tc.plan)
			got := PlanLacks(p, tc.m)
			if !slices.Equal(got.Packages, tc.packages) {
				t.Errorf("packages = %v, want %v", got.Packages, tc.packages)
			}
			if !slices.Equal(got.Images, tc.images) {
				t.Errorf("images = %v, want %v", got.Images, tc.images)
			}
			if got.Ready() != tc.ready {
				t.Errorf("Ready() = %v, want %v (%+v)", got.Ready(), tc.ready, got)
			}
			if tc.other != "" {
				found := false
				for _, o := range got.Other {
					found = found || strings.Contains(o.What+" "+o.Fix, tc.other)
				}
				if !found {
					t.Errorf("other = %+v, want one with %q", got.Other, tc.other)
				}
			} else if len(got.Other) > 0 {
				t.Errorf("other = %+v, want none", got.Other)
			}
			if tc.wantUnchecked != "" && !slices.Contains(got.Unchecked, tc.wantUnchecked) {
				t.Errorf("unchecked = %v, want %q", got.Unchecked, tc.wantUnchecked)
			}
			if len(got.Packages) > 0 && got.Install() != "apt-get install --no-install-recommends "+strings.Join(tc.packages, " ") {
				t.Errorf("Install() = %q", got.Install())
			}
			if len(got.Images) > 0 && got.BuildImages() != "ctrperf images build --for "+tc.plan {
				t.Errorf("BuildImages() = %q", got.BuildImages())
			}
		})
	}
}

// TestPlanLacksLeavesGuestProgramsToTheGuest: the programs a vm
// configuration's services run are the guest disk's, never looked for on
// this machine's PATH (fio, sysbench here); those of the host runtime
// are; a guest's disk: virtiofs lacks virtiofsd where it is missing.
func TestPlanLacksLeavesGuestProgramsToTheGuest(t *testing.T) {
	src := func(rt, vmBlock string) string {
		return "name: g\nworkload: fileio\nload: {job: fsync}\nbaseline: b\nconfigurations:\n  - name: b\n    runtime: host\n  - name: g\n    runtime: " + rt + "\n" + vmBlock
	}
	m := withVM(machine(without(everyCommand, "fio"), currentImages), "", "")
	for _, tc := range []struct {
		desc, plan string
		m          Machine
		packages   []string
		other      string
	}{
		{"bare metal needs fio here", src("host", ""), m, []string{"fio"}, ""},
		{"a guest's fio is its disk's", strings.Replace(src("vm", "    vm: {accel: tcg}\n"), "runtime: host", "runtime: vm", 1), m, nil, ""},
		{"virtiofs without virtiofsd", strings.Replace(src("vm", "    vm: {accel: tcg, disk: virtiofs}\n"), "runtime: host", "runtime: vm", 1),
			func() Machine { m := m; m.VMVirtiofs = "virtiofsd not installed"; return m }(), nil, "runtime vm with disk virtiofs (configuration g) virtiofsd not installed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := PlanLacks(parsePlan(t, tc.plan, plan.Options{}), tc.m)
			if !slices.Equal(got.Packages, tc.packages) {
				t.Errorf("packages %v, want %v", got.Packages, tc.packages)
			}
			var other []string
			for _, o := range got.Other {
				other = append(other, o.What+" "+o.Fix)
			}
			if (tc.other == "") != (len(other) == 0) || (tc.other != "" && !strings.Contains(strings.Join(other, "\n"), tc.other)) {
				t.Errorf("other %q, want %q", other, tc.other)
			}
		})
	}
}

// withVM is m where runtime vm's accel kvm and tcg do not run for these
// reasons ("": they do).
func withVM(m Machine, kvm, tcg string) Machine {
	m.VM, m.VMEmulated = kvm, tcg
	return m
}

// TestPlanImagesGuestDocker: a guest with Docker inside runs the images
// its workload names (the Debian base where it names none), which are
// shipped into it from this machine's engine; a guest without runs none.
func TestPlanImagesGuestDocker(t *testing.T) {
	src := func(vmBlock, app string) string {
		return "name: g\nworkload: command\napp: {command: \"true\"" + app + "}\nbaseline: g\nconfigurations:\n  - name: g\n    runtime: vm\n    vm: " + vmBlock + "\n"
	}
	tests := []struct {
		desc, src string
		want      []string
	}{
		{"docker inside, the workload's image", src("{accel: tcg, docker: true}", ", image: x/own:1"), []string{"x/own:1"}},
		{"docker inside, the Debian base", src("{accel: tcg, docker: true}", ""), []string{"ctrperf/debian-base:latest"}},
		{"no docker: the guest's processes", src("{accel: tcg}", ", image: x/own:1"), nil},
	}
	for _, tc := range tests {
		p, err := ParsePlan("g.yaml", []byte(tc.src), plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := PlanImages(p)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: PlanImages = %v, %v; want %v", tc.desc, got, err, tc.want)
		}
	}
}
