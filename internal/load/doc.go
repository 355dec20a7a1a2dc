// Package load generates load that does not lie about latency, and wraps the
// benchmark tools (fio, sysbench, stress-ng) that measure a target from inside.
//
// Every number ctrperf reports comes from here, so the generator must neither
// be the bottleneck nor hide queueing. The pieces form one pipeline, as in
// vegeta: an arrival schedule (fixed rate or Poisson) or a set of closed-loop
// workers hands sessions to virtual users (VU); a VU speaks one protocol
// (HTTP/1.1 or the memcached text protocol) over its own keep-alive
// connection; every request is observed into a per-label HdrHistogram
// (microseconds) with its error kind; the result is a *results.Measurement.
//
// # Open loop and coordinated omission
//
// In open-loop mode (Profile.Rate > 0) sessions arrive on a schedule that
// never looks at responses. Each session has an intended start time from the
// schedule. Latency is measured as follows:
//
//   - The first request of a session counts from the session's intended
//     start, not from when it was actually sent. If every VU was busy (the
//     in-flight bound MaxInFlight was hit) or the generator fell behind, the
//     wait for a VU is part of the latency and the session counts as Late.
//   - Request k > 0 of a session counts from the moment the response to
//     request k-1 arrived (plus the step's think time). A user cannot click
//     "create ticket" before the login page came back, so the intended time of
//     a later step is defined by the previous response; a stall that delays
//     step k-1 is already in step k-1's latency and is not counted twice.
//
// Hence a server stall of length D shows up in the latency of every request
// that should have been sent during it: requests in flight when it started
// wait for it to end, and new sessions keep arriving during it (at the
// schedule's rate, each counting from its intended time) instead of being
// held back as a closed-loop generator would. Sessions due in the window that
// could not start before it ended (the generator was saturated) are counted as
// error kind "not_started" on the first step and as Late, and the achieved
// rate shows the shortfall: a rate the machine cannot reach is never
// silently lowered.
//
// The generator's own delay is measured too: for every measured session of
// an open loop, how long after its intended start the session actually began
// (schedule loop behind, wait for a VU, Go scheduler, or a CPU taken by the
// services under test). It is part of the latencies; LoadStats.Lateness*
// report it so that client delay can be told apart from server delay, and
// ProtectGenerator gives the generator a cgroup with a high CPU weight so
// that a tenant saturating the CPUs cannot take them from it.
//
// Closed-loop mode (Profile.Concurrency > 0, Rate 0) runs N VUs back to back,
// like wrk or memslap, for saturation throughput; latency counts from the
// actual send since no request is ever due before the previous one returns.
//
// # Measured window
//
// The Warmup is driven but not recorded; sessions whose intended start lies in
// [warm-up end, warm-up end + Duration) are recorded, including their steps
// that finish after the window (the drain is bounded by the request timeout).
// Metrics["throughput_per_s"] is the number of successfully completed
// requests (memcached: operations) per second of the measured window; the
// per-label table shows all samples per second as JMeter does.
//
// # Scenario files (YAML)
//
//	name: ticketd                 # optional
//	headers: {Accept: text/html}  # optional, sent with every step
//	steps:
//	  - label: login page         # the operation label in the report
//	    method: GET               # default GET
//	    path: /login              # joined to the base URL given on the command line
//	    expect: 200               # expected status; default: any status < 400
//	    extract:                  # regexp with one group over the response body
//	      csrf: 'name="csrf" value="([^"]+)"'
//	  - label: login
//	    method: POST
//	    path: /login
//	    form: {user: "user{{vu}}", password: secret, csrf: "{{csrf}}"}
//	    expect: 302
//	    follow_redirects: false   # default true (up to 10 hops, all in this step's latency)
//	  - label: new ticket
//	    method: POST
//	    path: /projects/1/tickets
//	    body: '{"title":"t{{session}}"}'   # raw body instead of form
//	    headers: {Content-Type: application/json}
//	    think: 0s                 # pause before this step, not counted as latency
//
// Variables are referenced as {{name}} in path, form values, body and header
// values. Built-ins: {{vu}} (virtual user number), {{session}} (session
// number) and {{rand}} (a random number). A reference to a variable that no
// earlier step extracts is rejected before any load starts. Each session gets
// a fresh cookie jar (a new user logging in); the VU's connection is kept
// alive across its sessions.
package load
