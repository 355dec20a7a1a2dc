package vm

import (
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/engine"
)

// TestInitEngineFlag: the kernel command line's ctrperf.docker asks the
// guest's init for dockerd and says how long it waits for it.
func TestInitEngineFlag(t *testing.T) {
	cases := []struct {
		desc, cmdline string
		wait          time.Duration
		want, err     bool
	}{
		{"no flag: no dockerd", "console=ttyS0 rdinit=/ctrperf ctrperf.ip=198.19.220.2/30 -- __vminit", 0, false, false},
		{"the wait in seconds", "console=ttyS0 ctrperf.docker=90 -- __vminit", 90 * time.Second, true, false},
		{"not a number", "ctrperf.docker=yes", 0, true, true},
		{"no wait", "ctrperf.docker=0", 0, true, true},
		{"another key's prefix", "ctrperf.dockerd=5", 0, false, false},
	}
	for _, c := range cases {
		wait, want, err := dockerWanted(c.cmdline)
		if wait != c.wait || want != c.want || (err != nil) != c.err {
			t.Errorf("%s: dockerWanted(%q) = %s, %v, %v", c.desc, c.cmdline, wait, want, err)
		}
	}
}

// TestInitEngineWait: init waits for an engine that answers /_ping, and
// says why when it exits first or never answers.
func TestInitEngineWait(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	alive := func() (bool, unix.WaitStatus) { return false, 0 }
	if err := waitDocker(t.Context(), sock, time.Second, func() (bool, unix.WaitStatus) { return true, unix.WaitStatus(3 << 8) }); err == nil || !strings.Contains(err.Error(), "exited (status 3)") {
		t.Errorf("an engine that exited: %v", err)
	}
	if err := waitDocker(t.Context(), sock, 0, alive); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("no engine: %v", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("OK"))
	})}
	go srv.Serve(l)
	defer srv.Close()
	if err := waitDocker(t.Context(), sock, time.Minute, alive); err != nil {
		t.Errorf("an engine that answers: %v", err)
	}
}

// TestContainerSpec: a guest with Docker runs each service of the
// process spec the workloads write as a container of the base image
// running the host's argv, the guest's ctrperf bound in, on the guest's
// network; the data as placed; the spec it was made from unchanged.
func TestContainerSpec(t *testing.T) {
	spec := engine.DeploySpec{RunID: "r1", Network: engine.NetworkHost, Data: engine.DataBind, Services: []engine.Service{
		{Name: "app", Command: []string{"ticketd", "--port", "{{port:app}}"}, HostCommand: []string{"{{ctrperf}}", "__ticketd", "--port", "{{port:app}}"},
			Ports: []int{8080}, DataDir: "/data", Env: map[string]string{"A": "1"}},
		{Name: "db", Command: []string{"sh", "-c", "sleep 1"}},
		{Name: "idle", Image: "user/own:1"},
	}}
	got := ContainerSpec(spec, "ctrperf/debian-base:latest")
	if got.Network != engine.NetworkHost || got.Data != engine.DataBind || got.RunID != "r1" {
		t.Errorf("spec %+v", got)
	}
	want := []struct{ entry, cmd []string }{
		{[]string{"{{ctrperf}}"}, []string{"__ticketd", "--port", "{{port:app}}"}},
		{[]string{"sh"}, []string{"-c", "sleep 1"}},
		{nil, nil},
	}
	for i, s := range got.Services {
		img := "ctrperf/debian-base:latest"
		if i == 2 {
			img = "user/own:1" // the workload's own
		}
		if s.Image != img || len(s.HostCommand) != 0 || !slices.Equal(s.Entrypoint, want[i].entry) || !slices.Equal(s.Command, want[i].cmd) ||
			!slices.Equal(s.HostFiles, []string{GuestBinary}) {
			t.Errorf("service %s: %+v", s.Name, s)
		}
	}
	if a := got.Services[0]; a.DataDir != "/data" || a.Env["A"] != "1" || !slices.Equal(a.Ports, []int{8080}) {
		t.Errorf("app lost its knobs: %+v", a)
	}
	if err := engine.ValidateSpec(engine.RuntimeDocker, engine.DeploySpec{RunID: got.RunID, Network: got.Network, Data: got.Data, Services: got.Services[:2]}); err != nil {
		t.Errorf("not a spec of the docker runtime: %v", err)
	}
	if spec.Services[0].Image != "" || len(spec.Services[0].HostFiles) != 0 || spec.Services[0].HostCommand[0] != "{{ctrperf}}" {
		t.Errorf("the caller's spec changed: %+v", spec.Services[0])
	}
}
