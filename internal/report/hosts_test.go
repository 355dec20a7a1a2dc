package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

// hostsFixture writes the report fixture's records as a two-host plan's
// (every run deployed on lab-sut, driven from lab-load, but docker-host-net
// driven from this machine) with env from testdata/hosts.
func hostsFixture(t *testing.T, env string) *Report {
	t.Helper()
	dir := t.TempDir()
	recs := genRecords(t)
	for i := range recs {
		h := &results.RunHosts{SUT: &results.RunHost{Name: "lab-sut", Dest: "root@198.19.200.2:22", Hostname: "lab-sut"}}
		if recs[i].Config != "docker-host-net" {
			h.Load = &results.RunHost{Name: "lab-load", Dest: "root@198.19.200.3:22"}
		}
		recs[i].Hosts = h
	}
	writeFixture(t, dir, recs, "host")
	b, err := os.ReadFile(filepath.Join("testdata", "hosts", env))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, results.EnvFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Load(dir, testStats)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func render(t *testing.T, rep *Report, format string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, rep, format); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The lab's hosts (namespaces of one machine, one boot id) side by side in
// every format, with the sentence that they prove the mechanism only.
func TestHostsSideBySideOneKernel(t *testing.T) {
	rep := hostsFixture(t, "env-lab.json")
	if len(rep.Env.Hosts) != 2 || rep.Env.Hosts[0].Name != "lab-sut" || rep.Env.Hosts[1].Name != "lab-load" || !rep.Env.SameKernel() {
		t.Fatalf("hosts = %+v", rep.Env.Hosts)
	}
	if got := strings.Join(rep.Env.Hosts[1].Configs, ","); strings.Contains(got, "docker-host-net") || !strings.Contains(got, "host") {
		t.Errorf("lab-load used by %s; docker-host-net's load ran here", got)
	}
	table := render(t, rep, "table")
	env := table[strings.Index(table, "Environment\n"):]
	env = env[:strings.Index(env, "\n\n")]
	for _, w := range []string{
		"the hosts share one boot id: " + OneKernel,
		"latencies timed on the load host alone",
		"host                   lab-sut (sut)",
		"lab-load (load)",
		"this machine (ctrperf, load)",
		"root@198.19.200.2:22",
		"(local)",
		"6.18.0 x86_64",
		"2 (AMD EPYC 7B13)",
		"24.0 GiB",
		"Docker 27.5.1, overlay2",
		"none", // lab-load has no engine
		"5f1c2a9e",
		"+0.120 ms ± 0.150 (RTT 0.300 ms, 8 rounds)",
		"-0.040 ms ± 0.110 (RTT 0.220 ms, 8 rounds)",
		"(reference)",
		"every configuration",
	} {
		if !strings.Contains(env, w) {
			t.Errorf("table's environment lacks %q:\n%s", w, env)
		}
	}
	if !strings.HasSuffix(strings.TrimRight(env, " \n"), "docker-host-net") {
		t.Errorf("this machine's column does not name docker-host-net, whose load ran here:\n%s", env)
	}
	// One row per fact, the hosts in columns.
	for _, label := range []string{"destination", "hostname", "kernel", "CPUs", "memory", "engine", "boot id", "clock vs this machine", "used by"} {
		if !strings.Contains(env, "\n"+label+" ") {
			t.Errorf("no %s row:\n%s", label, env)
		}
	}
	if !strings.Contains(table, "Warnings") || !strings.Contains(table, "share one boot id (one kernel, as the lab's namespaces do): "+OneKernel) {
		t.Errorf("no one-kernel warning:\n%s", table)
	}
	if s := render(t, rep, "summary"); !strings.Contains(s, OneKernel) {
		t.Errorf("the summary bench prints lacks the one-kernel warning:\n%s", s)
	}
	md := render(t, rep, "md")
	for _, w := range []string{"| host | lab-sut (sut) | lab-load (load) | this machine (ctrperf, load) |", "| destination | root@198.19.200.2:22 | root@198.19.200.3:22 | (local) |", OneKernel} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown lacks %q", w)
		}
	}
	html := render(t, rep, "html")
	card := html[strings.Index(html, `<div class="card env">`):]
	card = card[:strings.Index(card, "</div>")]
	for _, w := range []string{`<table class="hosts">`, `<th>lab-sut (sut)</th>`, `<td>root@198.19.200.2:22</td>`, "<td>+0.120 ms ± 0.150 (RTT 0.300 ms, 8 rounds)</td>", "the hosts share one boot id: " + OneKernel} {
		if !strings.Contains(card, w) {
			t.Errorf("html environment card lacks %q:\n%s", w, card)
		}
	}
	var doc struct {
		Env struct {
			Hosts []HostUse `json:"hosts"`
		} `json:"env"`
	}
	if err := json.Unmarshal([]byte(render(t, rep, "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Env.Hosts) != 2 || doc.Env.Hosts[0].Clock == nil || doc.Env.Hosts[0].Clock.RTTMs != 0.3 || doc.Env.Hosts[0].Engine.Version != "27.5.1" {
		t.Errorf("json env.hosts = %+v", doc.Env.Hosts)
	}
}

// Two real machines: side by side, without the one-kernel sentence.
func TestHostsSideBySideTwoMachines(t *testing.T) {
	rep := hostsFixture(t, "env-two-machines.json")
	if rep.Env.SameKernel() {
		t.Fatal("SameKernel on three boot ids")
	}
	table := render(t, rep, "table")
	if strings.Contains(table, OneKernel) || strings.Contains(table, "one boot id") {
		t.Errorf("two machines reported as one kernel:\n%s", table)
	}
	for _, w := range []string{"db1", "loadgen1", "16 (Intel(R) Xeon(R) Gold 6338)", "6.1.0-28-amd64 x86_64"} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q", w)
		}
	}
}

// A run directory without env.json's hosts still names them from the
// records (the facts unknown), and a plan on this machine alone has no
// hosts table at all (the shipped fixture's report is unchanged).
func TestHostsFromRecordsOnly(t *testing.T) {
	recs := genRecords(t)
	for i := range recs {
		recs[i].Hosts = &results.RunHosts{SUT: &results.RunHost{Name: "box", Dest: "u@10.0.0.1:22"}}
	}
	b, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := envSection(b.Env)
	if !ok || len(s.Header) != 3 || s.Header[1] != "box (sut)" || s.Header[2] != "this machine (ctrperf, load)" {
		t.Fatalf("section = %+v", s)
	}
	if s.Rows[0][1] != "u@10.0.0.1:22" || s.Rows[7][1] != "not measured" {
		t.Errorf("rows = %q", s.Rows)
	}
	local := loadFixture(t)
	if s, _ := envSection(local.Env); s.Header != nil || strings.Contains(strings.Join(s.Lines, "\n"), "hosts") {
		t.Errorf("a local plan has a hosts table: %+v", s)
	}
}
