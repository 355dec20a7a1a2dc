// Command load-bench shows that ctrperf's load generator does not lie and is
// not the bottleneck (issue 4). Run from the module root:
//
//	go run ./benchmarks/load                  # all parts
//	go run ./benchmarks/load -only fidelity   # one part: fidelity, efficiency, cpu, memslap
//
// Parts:
//
//   - fidelity: an open-loop run against a server that answers in 5 ms and
//     stalls once for 1 s. Every request that should have been sent during
//     the stall must show it: the number of requests slower than x must be
//     rate × (stall − x) for x across the stall. The same server driven
//     closed-loop shows what coordinated omission hides.
//   - efficiency: `ctrperf load --concurrency 64` vs `wrk -t2 -c64` against
//     nginx serving a small static file on 127.0.0.1, in 21 rounds of one
//     3 s run each, the order alternating; the median over the rounds of
//     the ratio of requests/s must be at least 1, and the lower end of its
//     95 % interval at least 0.97. Each run also prints the generator's and nginx's CPU
//     per request, the idle share and the share of the machine its
//     neighbours took.
//   - cpu: the generator's own CPU at the seed's rate (2000 sessions / 60 s)
//     of a 4-step session against a fast local server; must stay under 10 %
//     of one core.
//   - memslap: the seed-004 configuration (memcached set, concurrency 4,
//     100000 operations) against a local memcached.
//
// Everything runs on loopback; nginx and memcached are started here with
// their files in a temporary directory and stopped by PID.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/load"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

func main() {
	only := flag.String("only", "", "run one part: fidelity, efficiency, cpu, memslap")
	// Many short rounds rather than a few long ones: on this VM the rate
	// nginx serves swings by ±15 % from one second to the next whichever
	// generator drives it, so a pair of 10 s runs compares two different
	// machines as often as two generators.
	rounds := flag.Int("rounds", 21, "efficiency: rounds (pairs of one run of each generator)")
	roundDur := flag.Duration("round", 3*time.Second, "efficiency: duration of one round")
	cpuDur := flag.Duration("cpu-duration", 60*time.Second, "cpu: measured window at 2000 sessions/60 s")
	bin := flag.String("ctrperf", "", "use this ctrperf binary (e.g. an older build, to compare) instead of building ./cmd/ctrperf")
	flag.Parse()

	dir, err := os.MkdirTemp("", "ctrperf-load-bench-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	// nginx's workers run as an unprivileged user: MkdirTemp's 0700 would
	// make every request a 403 (which wrk counts as a request).
	if err := os.Chmod(dir, 0o755); err != nil {
		fatal(err)
	}
	ctrperf := filepath.Join(dir, "ctrperf")
	if *bin != "" {
		ctrperf = *bin
	} else if *only == "" || *only == "efficiency" || *only == "cpu" || *only == "memslap" {
		if out, err := exec.Command("go", "build", "-o", ctrperf, "./cmd/ctrperf").CombinedOutput(); err != nil {
			fatal(fmt.Errorf("build ctrperf (run from the module root): %v: %s", err, out))
		}
	}
	failed := false
	run := func(name string, f func() error) {
		if *only != "" && *only != name {
			return
		}
		fmt.Printf("== %s\n", name)
		if err := f(); err != nil {
			fmt.Printf("FAIL %s: %v\n", name, err)
			failed = true
		}
		fmt.Println()
	}
	run("fidelity", fidelity)
	run("efficiency", func() error { return efficiency(dir, ctrperf, *rounds, *roundDur) })
	run("cpu", func() error { return cpuUse(dir, ctrperf, *cpuDur) })
	run("memslap", func() error { return memslap(ctrperf) })
	if failed {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "load-bench:", err)
	os.Exit(1)
}

// ---- fidelity ----

// stallServer answers every request after serviceTime, except that from
// stallAfter after its first request, it stalls for stall once: a request
// arriving during the stall (or being served when it starts) waits until
// the stall ends.
type stallServer struct {
	serviceTime, stallAfter, stall time.Duration
	once                           sync.Once
	mu                             sync.Mutex
	stallStart, stallEnd           time.Time
}

func (s *stallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.once.Do(func() {
		s.mu.Lock()
		s.stallStart = now.Add(s.stallAfter)
		s.stallEnd = s.stallStart.Add(s.stall)
		s.mu.Unlock()
	})
	s.mu.Lock()
	start, end := s.stallStart, s.stallEnd
	s.mu.Unlock()
	done := now.Add(s.serviceTime)
	if done.After(start) && now.Before(end) {
		done = end.Add(s.serviceTime)
	}
	time.Sleep(time.Until(done))
	w.Write([]byte("ok"))
}

func fidelity() error {
	const (
		rate     = 200.0
		duration = 5 * time.Second
		stall    = time.Second
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &stallServer{serviceTime: 5 * time.Millisecond, stallAfter: 2 * time.Second, stall: stall}}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"

	d, err := load.NewHTTP(load.HTTPConfig{BaseURL: url})
	if err != nil {
		return err
	}
	m, err := load.Run(context.Background(), d, load.Profile{Rate: rate, Duration: duration, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	if err := load.WriteAggregateTable(os.Stdout, m, d.Labels()); err != nil {
		return err
	}
	h, err := results.DecodeHistogram(m.Operations["GET /"].Histogram)
	if err != nil {
		return err
	}
	// Requests intended at t into the stall wait stall − t: the number
	// slower than x is rate × (stall − x). Tolerance: 15 % plus 5 requests
	// for scheduler jitter and the 5 ms service time.
	var bad []string
	fmt.Printf("%-12s %10s %10s\n", "latency ≥", "expected", "measured")
	for _, x := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, 900 * time.Millisecond} {
		want := rate * (stall - x).Seconds()
		got := float64(countAtLeast(h, x))
		fmt.Printf("%-12v %10.0f %10.0f\n", x, want, got)
		if got < 0.85*want-5 || got > 1.15*want+5 {
			bad = append(bad, fmt.Sprintf("≥%v: %0.f requests, expected %.0f", x, got, want))
		}
	}
	p99 := time.Duration(h.ValueAtQuantile(99)) * time.Microsecond
	max := time.Duration(h.Max()) * time.Microsecond
	fmt.Printf("open loop: p99 %v, max %v over %d requests\n", p99, max, h.TotalCount())
	if max < stall*9/10 {
		bad = append(bad, fmt.Sprintf("max %v does not show the %v stall", max, stall))
	}
	// The stall holds 20 % of the requests: p99 must sit inside it.
	if p99 < stall/2 {
		bad = append(bad, fmt.Sprintf("p99 %v does not reflect the stall", p99))
	}

	// What a closed-loop generator reports for the same stall.
	srv2 := &http.Server{Handler: &stallServer{serviceTime: 5 * time.Millisecond, stallAfter: 2 * time.Second, stall: stall}}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv2.Serve(ln2)
	defer srv2.Close()
	d2, err := load.NewHTTP(load.HTTPConfig{BaseURL: "http://" + ln2.Addr().String() + "/"})
	if err != nil {
		return err
	}
	m2, err := load.Run(context.Background(), d2, load.Profile{Concurrency: 1, Duration: duration, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	h2, err := results.DecodeHistogram(m2.Operations["GET /"].Histogram)
	if err != nil {
		return err
	}
	fmt.Printf("closed loop (1 worker, what coordinated omission shows): %d requests ≥ 500ms of %d, p99 %v\n",
		countAtLeast(h2, 500*time.Millisecond), h2.TotalCount(), time.Duration(h2.ValueAtQuantile(99))*time.Microsecond)
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	fmt.Println("PASS fidelity: every request due during the stall carries it")
	return nil
}

// countAtLeast counts recorded latencies ≥ x (to the histogram's precision).
func countAtLeast(h *hdrhistogram.Histogram, x time.Duration) int64 {
	us := x.Microseconds()
	var n int64
	for _, b := range h.Distribution() {
		if b.From >= us {
			n += b.Count
		}
	}
	return n
}

// ---- efficiency ----

const nginxConf = `worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp;
  proxy_temp_path %[1]s/tmp;
  fastcgi_temp_path %[1]s/tmp;
  uwsgi_temp_path %[1]s/tmp;
  scgi_temp_path %[1]s/tmp;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:%[2]d; root %[1]s/html; }
}
`

// startNginx runs nginx in the foreground with its own config; stop()
// sends SIGQUIT to the master by PID and waits.
func startNginx(dir string) (url string, pid int, stop func(), err error) {
	nd := filepath.Join(dir, "nginx")
	for _, d := range []string{"html", "tmp"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return "", 0, nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(nd, "html", "index.html"), bytes.Repeat([]byte("a"), 612), 0o644); err != nil {
		return "", 0, nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", 0, nil, err
	}
	conf := filepath.Join(nd, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, nd, port)), 0o644); err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command("nginx", "-c", conf, "-p", nd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("start nginx: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitListen(addr); err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("nginx: %w; stderr: %s", err, stderr.String())
	}
	return "http://" + addr + "/index.html", cmd.Process.Pid, stop, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitListen(addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
)

// effRun is one generator's round.
type effRun struct {
	rps       float64
	cpuPerReq time.Duration // the generator's user+system CPU per request
	others    float64       // share of the machine's CPU taken by neither the generator nor nginx
	idle      float64       // share of the machine's CPU left idle
	nginxReq  time.Duration // nginx's CPU per request
}

// The machine is shared: other processes (compilers, tests) take CPU from
// both generators and from nginx, and their load comes and goes. So each
// round is a pair run back to back, the pair's order alternates, the ratio
// is taken per pair (the two halves saw about the same neighbours) and its
// median reported, and every round prints what the neighbours took. The
// generators' CPU per request does not depend on how much CPU the machine
// had left, so it is printed too: it is the efficiency itself.
func efficiency(dir, ctrperf string, rounds int, dur time.Duration) error {
	url, nginxPID, stop, err := startNginx(dir)
	if err != nil {
		return err
	}
	defer stop()
	secs := strconv.Itoa(int(dur.Seconds())) + "s"
	var wrk, ours []effRun
	var pairs []float64
	for i := 0; i < rounds; i++ {
		// Alternate who goes first so that drift in the machine's load
		// does not favour one side.
		order := []string{"wrk", "ctrperf"}
		if i%2 == 1 {
			order = []string{"ctrperf", "wrk"}
		}
		var w, o effRun
		for _, who := range order {
			before := sampleCPU(nginxPID)
			switch who {
			case "wrk":
				cmd := exec.Command("wrk", "-t2", "-c64", "-d"+secs, url)
				out, err := cmd.CombinedOutput()
				if err != nil {
					return fmt.Errorf("wrk: %v: %s", err, out)
				}
				if bytes.Contains(out, []byte("Non-2xx")) || bytes.Contains(out, []byte("Socket errors")) {
					return fmt.Errorf("wrk got errors, its rate would not count served files: %s", out)
				}
				m, n := wrkRPS.FindSubmatch(out), wrkRequests.FindSubmatch(out)
				if m == nil || n == nil {
					return fmt.Errorf("wrk printed no Requests/sec or request count: %s", out)
				}
				w.rps, _ = strconv.ParseFloat(string(m[1]), 64)
				reqs, _ := strconv.ParseFloat(string(n[1]), 64)
				gen := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				w.cpuPerReq = time.Duration(float64(gen) / reqs)
				after := sampleCPU(nginxPID)
				w.others, w.idle, w.nginxReq = after.othersSince(before, gen), after.idleSince(before), after.nginxSince(before, reqs)
				wrk = append(wrk, w)
				fmt.Printf("round %d wrk -t2 -c64:               %9.0f req/s, %5.1f µs CPU/request (nginx %4.1f), idle %3.0f%%, neighbours %3.0f%% of the machine\n", i+1, w.rps, us(w.cpuPerReq), us(w.nginxReq), 100*w.idle, 100*w.others)
			case "ctrperf":
				m, gen, err := ctrperfLoadCPU(ctrperf, url, "--concurrency", "64", "--duration", secs)
				if err != nil {
					return err
				}
				op := m.Operations["GET /index.html"]
				if errs := op.ErrorCount(); errs > 0 {
					return fmt.Errorf("ctrperf load saw %d errors: %v", errs, op.Errors)
				}
				o.rps = m.Metrics["requests_per_s"]
				o.cpuPerReq = time.Duration(float64(gen) / float64(op.Count))
				after := sampleCPU(nginxPID)
				o.others, o.idle, o.nginxReq = after.othersSince(before, gen), after.idleSince(before), after.nginxSince(before, float64(op.Count))
				ours = append(ours, o)
				fmt.Printf("round %d ctrperf load --concurrency 64: %9.0f req/s, %5.1f µs CPU/request (nginx %4.1f), idle %3.0f%%, neighbours %3.0f%% of the machine\n", i+1, o.rps, us(o.cpuPerReq), us(o.nginxReq), 100*o.idle, 100*o.others)
			}
		}
		pairs = append(pairs, o.rps/w.rps)
	}
	field := func(rs []effRun, f func(effRun) float64) []float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return v
	}
	rps := func(r effRun) float64 { return r.rps }
	cpu := func(r effRun) float64 { return us(r.cpuPerReq) }
	mw, mo := median(field(wrk, rps)), median(field(ours, rps))
	ratio := median(pairs)
	ci := stats.Options{}.MedianCI("efficiency", pairs)
	fmt.Printf("round ratios (ctrperf/wrk):")
	for _, r := range pairs {
		fmt.Printf(" %.2f", r)
	}
	fmt.Println()
	interval := "no interval"
	if ci.HasCI() {
		interval = fmt.Sprintf("95%% CI [%.2f, %.2f]", *ci.CILow, *ci.CIHigh)
		if *ci.CILow <= 1 && *ci.CIHigh >= 1 {
			interval += ", no measurable difference from wrk"
		}
	}
	fmt.Printf("median wrk %.0f req/s, ctrperf %.0f req/s (ratio of medians %.2f); median of the round ratios %.2f, %s (target ≥ 1.00, lower end ≥ 0.97)\n", mw, mo, mo/mw, ratio, interval)
	fmt.Printf("median CPU per request: wrk %.1f µs, ctrperf %.1f µs\n", median(field(wrk, cpu)), median(field(ours, cpu)))
	if ratio < 1.0 {
		return fmt.Errorf("median round ratio %.2f below 1.0", ratio)
	}
	// Issue 34's goal: level with wrk, and shown to be so, not a median
	// of 1.00 that the interval leaves 5 % below.
	if !ci.HasCI() || *ci.CILow < effLowest {
		return fmt.Errorf("median round ratio %.2f, but %s: the lower end must be at least %.2f", ratio, interval, effLowest)
	}
	fmt.Println("PASS efficiency")
	return nil
}

// effLowest is the least the 95 % interval of the round ratio may reach
// down to for efficiency to pass.
const effLowest = 0.97

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuSample is the machine's busy time and nginx's (all of its processes).
type cpuSample struct {
	busy, total, nginx time.Duration
}

// clockTick is USER_HZ, the unit of /proc/stat and /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func sampleCPU(nginxPID int) cpuSample {
	var s cpuSample
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i := 1; i < len(f) && i <= 8; i++ { // user nice system idle iowait irq softirq steal
			v, _ := strconv.ParseInt(f[i], 10, 64)
			s.total += time.Duration(v) * clockTick
			if i != 4 && i != 5 {
				s.busy += time.Duration(v) * clockTick
			}
		}
	}
	// nginx's master and its workers: the workers are the master's children.
	pids := []int{nginxPID}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nginxPID, nginxPID)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
	}
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start at ") ".
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			sy, _ := strconv.ParseInt(f[12], 10, 64)
			s.nginx += time.Duration(u+sy) * clockTick
		}
	}
	return s
}

// othersSince is the share of the machine's CPU since b that went neither
// to the generator (gen) nor to nginx.
func (a cpuSample) othersSince(b cpuSample, gen time.Duration) float64 {
	total := a.total - b.total
	if total <= 0 {
		return 0
	}
	o := float64(a.busy-b.busy-(a.nginx-b.nginx)-gen) / float64(total)
	if o < 0 {
		o = 0 // tick granularity
	}
	return o
}

// idleSince is the share of the machine's CPU since b that was idle (or
// waiting for I/O): CPU neither generator could use.
func (a cpuSample) idleSince(b cpuSample) float64 {
	total := a.total - b.total
	if total <= 0 {
		return 0
	}
	return float64(total-(a.busy-b.busy)) / float64(total)
}

// nginxSince is nginx's CPU per request since b.
func (a cpuSample) nginxSince(b cpuSample, requests float64) time.Duration {
	if requests <= 0 {
		return 0
	}
	return time.Duration(float64(a.nginx-b.nginx) / requests)
}

// ctrperfLoadCPU is ctrperfLoad that also returns the process's CPU time.
func ctrperfLoadCPU(bin string, args ...string) (*results.Measurement, time.Duration, error) {
	var cpu time.Duration
	m, err := runCtrperfLoad(bin, args, func(ps *os.ProcessState) { cpu = ps.UserTime() + ps.SystemTime() })
	return m, cpu, err
}

func ctrperfLoad(bin string, args ...string) (*results.Measurement, error) {
	return runCtrperfLoad(bin, args, nil)
}

func runCtrperfLoad(bin string, args []string, exited func(*os.ProcessState)) (*results.Measurement, error) {
	cmd := exec.Command(bin, append([]string{"load", "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if exited != nil && cmd.ProcessState != nil {
		exited(cmd.ProcessState)
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("ctrperf load %v: %v: %s", args, err, stderr.String())
	}
	var m results.Measurement
	if jerr := json.Unmarshal(out, &m); jerr != nil {
		return nil, fmt.Errorf("ctrperf load output: %v; stderr: %s", jerr, stderr.String())
	}
	if err != nil {
		fmt.Printf("ctrperf load exited: %v: %s\n", err, strings.TrimSpace(stderr.String()))
	}
	return &m, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ---- cpu ----

const cpuScenario = `name: seed-000 session
steps:
  - label: login page
    path: /login
    extract: {csrf: 'name="csrf" value="([^"]+)"'}
  - label: login
    method: POST
    path: /login
    form: {user: "user{{vu}}", password: secret, csrf: "{{csrf}}"}
    expect: 302
    follow_redirects: false
  - label: project page
    path: /projects/1
  - label: new ticket
    method: POST
    path: /projects/1/tickets
    form: {subject: "ticket {{session}}", csrf: "{{csrf}}"}
    expect: 201
`

// fastTicketServer answers the four steps at once (the server is not what
// is measured here).
func fastTicketServer() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<form><input type="hidden" name="csrf" value="tok123"></form>`)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "auth", Value: r.FormValue("user"), Path: "/"})
		http.Redirect(w, r, "/projects/1", http.StatusFound)
	})
	mux.HandleFunc("GET /projects/1", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "project") })
	mux.HandleFunc("POST /projects/1/tickets", func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie("auth"); err != nil {
			http.Error(w, "login first", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	return mux
}

func cpuUse(dir, ctrperf string, dur time.Duration) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fastTicketServer()}
	go srv.Serve(ln)
	defer srv.Close()
	sc := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(sc, []byte(cpuScenario), 0o644); err != nil {
		return err
	}
	rate := 2000.0 / 60
	// The generator runs as its own process, so its getrusage covers the
	// generator alone, not this server.
	m, err := ctrperfLoad(ctrperf, "http://"+ln.Addr().String(), "--rate", strconv.FormatFloat(rate, 'f', 4, 64),
		"--poisson", "--scenario", sc, "--duration", dur.String(), "--warmup", "2s")
	if err != nil {
		return err
	}
	if err := load.WriteAggregateTable(os.Stdout, m, []string{"login page", "login", "project page", "new ticket"}); err != nil {
		return err
	}
	for l, op := range m.Operations {
		if op.ErrorCount() > 0 {
			return fmt.Errorf("%s: errors %v", l, op.Errors)
		}
	}
	share := m.Load.CPUSeconds / m.DurationS
	fmt.Printf("generator CPU: %.3f s over %.0f s = %.2f%% of one core (target < 10%%)\n", m.Load.CPUSeconds, m.DurationS, 100*share)
	if share >= 0.10 {
		return fmt.Errorf("generator used %.1f%% of a core", 100*share)
	}
	fmt.Println("PASS cpu")
	return nil
}

// ---- memslap ----

func memslap(ctrperf string) error {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		fmt.Println("skip: memcached not installed")
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "64"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitListen(addr); err != nil {
		return err
	}
	m, err := ctrperfLoad(ctrperf, addr, "--memcached", "--mix", "set=1", "--concurrency", "4", "--ops", "100000")
	if err != nil {
		return err
	}
	op := m.Operations["set"]
	fmt.Printf("memslap --test set --concurrency 4 --execute-number 100000 equivalent: %d sets, %d errors, elapsed %.2f s, %.0f ops/s\n",
		op.Count, op.ErrorCount(), m.Metrics[results.MetricElapsed], m.Metrics[results.MetricThroughput])
	if op.Count != 100000 || op.ErrorCount() != 0 {
		return fmt.Errorf("want 100000 sets without errors")
	}
	return nil
}
