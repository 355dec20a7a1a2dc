package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSameKernel(t *testing.T) {
	for _, c := range []struct {
		name  string
		hosts []HostInfo
		want  bool
	}{
		{"none", nil, false},
		{"one host", []HostInfo{{BootID: "a"}}, false},
		{"two machines", []HostInfo{{BootID: "a"}, {BootID: "b"}}, false},
		{"one kernel", []HostInfo{{BootID: "a"}, {BootID: "b"}, {BootID: "a"}}, true},
		{"unknown ids are not a match", []HostInfo{{}, {}}, false},
	} {
		if got := SameKernel(c.hosts); got != c.want {
			t.Errorf("%s: SameKernel = %v, want %v", c.name, got, c.want)
		}
	}
}

// A record of a run on this machine alone has no hosts key (records written
// before hosts: existed read the same), and a two-host record keeps both.
func TestRunHostsJSON(t *testing.T) {
	b, err := json.Marshal(RunRecord{Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"hosts"`) {
		t.Errorf("local record has a hosts key: %s", b)
	}
	in := RunRecord{Plan: "p", Hosts: &RunHosts{
		SUT:  &RunHost{Name: "lab-sut", Dest: "root@198.19.200.2:22", Hostname: "lab-sut"},
		Load: &RunHost{Name: "lab-load", Dest: "root@198.19.200.3:22"},
	}}
	b, err = json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"hosts":{"sut":{"name":"lab-sut","dest":"root@198.19.200.2:22","hostname":"lab-sut"}`, `"load":{"name":"lab-load"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("record %s lacks %s", b, want)
		}
	}
	var out RunRecord
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Hosts, in.Hosts) {
		t.Errorf("round trip: %+v, want %+v", out.Hosts, in.Hosts)
	}
	if !(*RunHost)(nil).Local() || !(&RunHost{}).Local() || out.Hosts.SUT.Local() {
		t.Error("Local: want true for nil and unnamed, false for lab-sut")
	}
}

func TestReadEnvHosts(t *testing.T) {
	dir := t.TempDir()
	doc := `{"machine":{"hostname":"ctl","cpus":2,"boot_id":"b1"},
	"hosts":[{"roles":["sut"],"name":"lab-sut","dest":"root@198.19.200.2:22","hostname":"lab-sut","boot_id":"b1","kernel":"6.18","cpus":2,"mem_total_bytes":1073741824,"engine":{"runtime":"docker","name":"default","version":"27.5.1","private":false},"clock":{"offset_ms":0.02,"rtt_ms":0.3,"samples":8}}]}`
	if err := os.WriteFile(filepath.Join(dir, EnvFileName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := ReadEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e.Machine.BootID != "b1" || len(e.Hosts) != 1 {
		t.Fatalf("env = %+v", e)
	}
	h := e.Hosts[0]
	if h.Name != "lab-sut" || h.Dest != "root@198.19.200.2:22" || h.Roles[0] != RoleSUT || h.Engine.Version != "27.5.1" || h.Clock.RTTMs != 0.3 || h.Clock.Samples != 8 || h.MemTotal != 1<<30 {
		t.Errorf("host = %+v", h)
	}
}

// TestClockOffsetLocal: a host whose clock runs 1.5 ms ahead stamped an
// event 1.5 ms later than this machine's clock did.
func TestClockOffsetLocal(t *testing.T) {
	here := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	c := ClockOffset{OffsetMs: 1.5}
	if got := c.Local(here.Add(1500 * time.Microsecond).UnixNano()); !got.Equal(here) {
		t.Errorf("Local = %v, want %v", got, here)
	}
	if got := (ClockOffset{}).Local(here.UnixNano()); !got.Equal(here) {
		t.Errorf("no offset: %v", got)
	}
}
