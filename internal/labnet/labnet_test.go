package labnet

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := "# c\n\nA=1\nB_2=ctrperf-lab0\nC=198.19.210.\n"
	v, err := parse(good)
	if err != nil || v["A"] != "1" || v["B_2"] != "ctrperf-lab0" || v["C"] != "198.19.210." {
		t.Fatalf("parse = %v, %v", v, err)
	}
	for _, bad := range []string{"A=\"x\"\n", "A=$B\n", "a=1\n", "A=1 2\n", "A=1\nA=2\n", "export A=1\n"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) took it", bad)
		}
	}
}

// Every address of the file is in 198.18.0.0/15, the only range the
// project's own test machines may use.
func TestAddressesInBenchNet(t *testing.T) {
	bench := netip.MustParsePrefix("198.18.0.0/15")
	for k, v := range values {
		if !strings.HasSuffix(k, "_ADDR") && !strings.HasSuffix(k, "_IP") && !strings.HasSuffix(k, "_CIDR") && !strings.Contains(k, "_POOL") && !strings.HasSuffix(k, "_NET") && !strings.HasSuffix(k, "_BIP") {
			continue
		}
		s := strings.TrimSuffix(v, ".") // a prefix of addresses, KUBE_NODE_NET
		if strings.HasSuffix(v, ".") {
			s += ".0"
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			if !bench.Overlaps(p) || p.Bits() < bench.Bits() {
				t.Errorf("%s=%s: outside %s", k, v, bench)
			}
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Errorf("%s=%s: not an address or prefix", k, v)
			continue
		}
		if !bench.Contains(a) {
			t.Errorf("%s=%s: outside %s", k, v, bench)
		}
	}
}

// The shell reads the file as this package does: each name sourced by
// bash has the value Get gives.
func TestShellReadsAlike(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, "-c", "set -eu; . ./labnet.env; for n in $(sed -n 's/^\\([A-Z][A-Z0-9_]*\\)=.*/\\1/p' labnet.env); do printf '%s=%s\\n' \"$n\" \"${!n}\"; done").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		if Get(k) != v {
			t.Errorf("bash reads %s=%q, Go %q", k, v, Get(k))
		}
		n++
	}
	if n != len(values) {
		t.Errorf("bash read %d names, Go %d", n, len(values))
	}
}
