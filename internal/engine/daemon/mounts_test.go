package daemon

import (
	"net"
	"os"
	"reflect"
	"testing"

	"ctrperf/internal/kernel"
)

func TestParseMountInfo(t *testing.T) {
	f, err := os.Open("testdata/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := kernel.ParseMountinfo(f)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, path, wantFS string
	}{
		{"root", "/var/lib/ctrperf/engines/x", "ext4"},
		{"inside the loop mount", "/var/lib/ctrperf/mnt/ctrperf-btrfs-loop-btrfs-r1/docker", "btrfs"},
		{"tmpfs run", "/run/ctrperf/engines", "tmpfs"},
		{"escaped space", "/srv/with space/x", "tmpfs"},
		{"a prefix is not a parent", "/runner", "ext4"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := fsOf(m, tt.path); got != tt.wantFS {
				t.Errorf("fsOf(%s) = %q, want %q", tt.path, got, tt.wantFS)
			}
		})
	}
	got := kernel.MountsUnder(m, "/var/lib/ctrperf/mnt/ctrperf-btrfs-loop-btrfs-r1", "/run/ctrperf/x/abc")
	want := []string{"/var/lib/ctrperf/mnt/ctrperf-btrfs-loop-btrfs-r1/docker/btrfs", "/run/ctrperf/x/abc/netns/default", "/var/lib/ctrperf/mnt/ctrperf-btrfs-loop-btrfs-r1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mountsUnder = %v, want deepest first %v", got, want)
	}
}

func TestParseMountInfoMalformed(t *testing.T) {
	if _, err := kernel.ParseMountinfo(stringsReader("22 1 254:0 / / rw\n")); err == nil {
		t.Error("a line without the separator must be an error")
	}
}

func TestPickSubnet(t *testing.T) {
	cidr := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	cands := bridgeCandidates()
	tests := []struct {
		desc    string
		used    []*net.IPNet
		want    string
		wantErr bool
	}{
		{"nothing used", nil, "10.213.0.0/24", false},
		{"first two taken by bridges", []*net.IPNet{cidr("10.213.0.0/24"), cidr("10.213.1.0/24"), cidr("172.17.0.0/16")}, "10.213.2.0/24", false},
		{"a wide route covers them all", []*net.IPNet{cidr("10.0.0.0/8")}, "", true},
		{"a narrow route inside a candidate", []*net.IPNet{cidr("10.213.0.128/25")}, "10.213.1.0/24", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := pickSubnet(tt.used, cands)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want error, got %v", got)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("pickSubnet = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}
