// Package agent is ctrperf's far side: `ctrperf agent` runs on a host of a
// plan's hosts: (over SSH, internal/remote) or in a Kubernetes agent pod,
// and does there what bench does here — deploy and tear down on that host's
// engine, sample that host, run the load generator, clean — for the
// ctrperf that started it.
//
// The protocol is versioned JSON lines over one byte stream each way (the
// agent's stdin and stdout; any io.Reader/io.Writer pair in tests). Every
// line is one Message:
//
//	request   {"id":7,"method":"deploy","params":{...}}
//	response  {"id":7,"result":{...}}       or {"id":7,"error":{"code":"failed","message":"..."}}
//	event     {"id":7,"event":"sample","data":{...}}   streamed while request 7 runs
//	frame     {"id":7,"frame":"<base64>","more":true}  a piece of a message longer than FrameSize
//
// No line is longer than MaxLine: a message that would be (a run's series,
// a measurement with many histograms) goes as frames, which the receiver
// joins, and other messages (events, heartbeats) pass between them.
//
// The first request is always hello: both sides say which protocol
// version they speak (a mismatch is refused with both versions named) and
// the agent describes its host. Nothing else is implied by the transport:
// SSH, a pod's exec stream and an in-memory pipe carry the same lines.
//
// The agent is its session's owner on the far side: it keeps an owner
// record holding the run ids it deployed (so `ctrperf clean` there keeps
// them while it lives and removes them once it is gone, even after a
// SIGKILL), and its watchdog tears down everything the session made when
// the stream ends or the heartbeats stop.
package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/observe"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// Version is the protocol version this ctrperf speaks. It changes when a
// message changes incompatibly; both ends refuse another version.
// 2: messages longer than FrameSize go as frames; hello carries the build.
const Version = 2

// FrameSize bounds the JSON of a message sent as one line; a longer one is
// sent as frames of FrameSize bytes each.
const FrameSize = 1 << 20

// MaxLine bounds one line read: a frame (FrameSize bytes in base64) with
// its envelope. A longer line is no message of this protocol.
const MaxLine = FrameSize*4/3 + 4<<10

// maxLine is the longest line of frames of frameSize bytes.
func maxLine(frameSize int) int { return frameSize*4/3 + 4<<10 }

// MaxMessage bounds a message joined from frames (a run's series of a
// long window on a host of many CPUs is some hundred MiB).
const MaxMessage = 1 << 30

// Methods of the protocol.
const (
	MethodHello     = "hello"     // HelloParams → HelloResult; first, once
	MethodClock     = "clock"     // nil → ClockResult: one round trip of the clock-offset estimate
	MethodHeartbeat = "heartbeat" // nil → nil: the watchdog's proof of life
	MethodPing      = "engine.ping"
	MethodInfo      = "engine.info" // EngineRef → engine.Info: a private engine's own (hello has the default's)
	MethodDeploy    = "deploy"      // DeployParams → DeployResult
	MethodTeardown  = "teardown"    // TeardownParams → nil
	MethodExec      = "exec"        // ExecParams → engine.ExecResult
	// MethodObserveStart starts a sampler set (ObserveParams → ObserveStarted);
	// its samples stream as EventSample of the start request until
	// MethodObserveStop (ObserveStop → results.Series).
	MethodObserveStart = "observe.start"
	MethodObserveStop  = "observe.stop"
	// MethodDrive runs a workload's driver, the load generator, on this
	// host (DriveParams → results.Measurement, with its HdrHistograms
	// serialized: the caller merges histograms, never percentiles).
	// EventStarted marks the measured window, EventProgress a step.
	MethodDrive = "drive"
	// MethodImagesMissing says which images (by ID) the host's engine lacks
	// (ImagesParams → ImagesMissing); MethodImagesLoad streams one
	// `docker save` archive into `docker load` there, in chunks
	// (ImageChunk → nil, the last with Done → ImageLoaded).
	MethodImagesMissing = "images.missing"
	MethodImagesLoad    = "images.load"
	// MethodImagesLoadDisk loads a `docker save` archive from a block
	// device of the host (ImageDisk → ImageLoaded): a VM guest's disk that
	// its QEMU attached with the archive on it (internal/vm), where the
	// chunks' encoding through the agent's stream is the bottleneck (an
	// emulated CPU decodes them).
	MethodImagesLoadDisk = "images.load.disk"
	MethodClean          = "clean" // CleanParams → CleanResult
	// The real path between a load host and a SUT (engine.Reach):
	// MethodSource asks a host which of its addresses talks to another
	// (SourceParams → SourceResult, `ip route get`); MethodRouteAdd puts a
	// route of a run's on the load host (RouteParams → nil), removed by
	// MethodRouteRemove (RunParams → nil) or when the session ends;
	// MethodDialCheck dials from the host (DialParams → nil);
	// MethodAdmitCounts reads the SUT's admit chain of a run (RunParams →
	// engine.AdmitCounts).
	MethodSource      = "net.source"
	MethodRouteAdd    = "route.add"
	MethodRouteRemove = "route.remove"
	MethodDialCheck   = "dial.check"
	MethodAdmitCounts = "admit.counts"
	MethodShutdown    = "shutdown" // nil → nil: tear down the session and exit
)

// Events streamed while a request runs.
const (
	EventSample   = "sample"   // results.Sample, during observe.start's sampling
	EventStarted  = "started"  // Started, the driver's measured window began
	EventProgress = "progress" // string, a line of the driver's progress
	EventLog      = "log"      // string, a warning of the agent's (id 0: the session's)
)

// Message is one line of the protocol: a request (Method set), a response
// (Result or Error) or an event (Event set) of request ID.
type Message struct {
	ID     uint64          `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Frame is a piece of the JSON of message ID, More that pieces follow
	// (Conn sends and joins them; no caller sees a frame).
	Frame []byte `json:"frame,omitempty"`
	More  bool   `json:"more,omitempty"`
}

// Error codes: what the caller branches on.
const (
	CodeVersion       = "version"        // the peer speaks another protocol version
	CodeUnknownMethod = "unknown_method" // the agent does not know the method
	CodeBadParams     = "bad_params"     // params that do not decode
	CodeNoEngine      = "no_engine"      // the runtime is not available on this host (no Docker)
	CodeDiskFull      = "disk_full"      // the host's disk is full
	CodeFailed        = "failed"         // anything else, in Message
)

// Error is a failed request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is lets errors.Is(err, &Error{Code: c}) branch on the code alone.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Message == ""
}

// HelloParams opens a session.
type HelloParams struct {
	Version int `json:"version"`
	// Session names the bench session (its run-id prefix) or other caller;
	// the agent's owner record on the host carries it.
	Session string `json:"session"`
	// Heartbeat is how long the agent waits without any message before its
	// watchdog tears the session down (0: only the end of the stream does).
	Heartbeat time.Duration `json:"heartbeat_ns,omitempty"`
	// Build, when set, is the sha256 of the caller's ctrperf binary: an
	// agent whose own binary differs refuses the session (CodeVersion).
	// An agent pod's binary comes from an image built earlier; the same
	// protocol version does not make it the same ctrperf.
	Build string `json:"build,omitempty"`
}

// HelloResult is the agent's answer: its version and its host.
type HelloResult struct {
	Version int `json:"version"`
	// Facts are the host's: hostname, kernel, architecture, CPU model and
	// count, memory, cgroup layout, boot id (what env.json says of this
	// machine).
	Facts results.Machine `json:"facts"`
	// Engine is the host's default Docker engine; EngineError why there is
	// none (its docker configurations are then not_run with it).
	Engine      *results.EngineInfo `json:"engine,omitempty"`
	EngineError string              `json:"engine_error,omitempty"`
	PID         int                 `json:"pid"`
	Executable  string              `json:"executable"`
	// Build is the sha256 of the agent's binary, when hello asked (Build).
	Build string `json:"build,omitempty"`
}

// ClockResult is the agent's wall clock when it answered.
type ClockResult struct {
	UnixNano int64 `json:"unix_ns"`
}

// EngineRef names an engine of the host: the runtime and, for Docker, the
// engine knobs (a private engine per distinct spec, as on this machine).
type EngineRef struct {
	Runtime engine.Runtime    `json:"runtime"`
	Engine  engine.EngineSpec `json:"engine,omitempty"`
}

// SelfBinary stands in a service's argv for the ctrperf binary: the caller
// writes it where its own binary's path was, the agent puts its own (the
// copy on that host).
const SelfBinary = "{{ctrperf}}"

// DeployParams deploys one run's services on the host.
type DeployParams struct {
	EngineRef
	Spec engine.DeploySpec `json:"spec"`
}

// DeployResult is the deployed target as the caller sees it.
type DeployResult struct {
	Target Target             `json:"target"`
	Info   results.EngineInfo `json:"info"`
}

// SourceParams ask which address of the host talks to To (an address or
// a name the host resolves).
type SourceParams struct {
	To string `json:"to"`
}

// SourceResult is the host's address toward SourceParams.To and its device.
type SourceResult struct {
	To   netip.Addr `json:"to"`   // To, resolved
	Addr netip.Addr `json:"addr"` // this host's source address
	Dev  string     `json:"dev,omitempty"`
}

// RouteParams put one route of a run on the host.
type RouteParams struct {
	RunID string `json:"run_id"`
	engine.RunRoute
}

// RunParams name a run.
type RunParams struct {
	RunID string `json:"run_id"`
}

// DialParams dial Addr (host:port) from the host within Timeout.
type DialParams struct {
	Addr    string        `json:"addr"`
	Timeout time.Duration `json:"timeout_ns"`
}

// Target is an engine.Target without what only the host can hold (its
// dialer, the engine's bookkeeping): the agent keeps the real one.
type Target struct {
	RunID      string             `json:"run_id"`
	Runtime    engine.Runtime     `json:"runtime"`
	Network    engine.NetworkMode `json:"network"`
	Endpoints  []engine.Endpoint  `json:"endpoints,omitempty"`
	Containers []engine.Container `json:"containers,omitempty"`
	Netns      string             `json:"netns,omitempty"`
}

// WireTarget is t as the protocol carries it.
func WireTarget(t *engine.Target) Target {
	if t == nil {
		return Target{}
	}
	return Target{RunID: t.RunID, Runtime: t.Runtime, Network: t.Network, Endpoints: t.Endpoints, Containers: t.Containers, Netns: t.Netns}
}

// Engine is the target as an engine.Target (no dialer: net.Dialer).
func (t Target) Engine() *engine.Target {
	return &engine.Target{RunID: t.RunID, Runtime: t.Runtime, Network: t.Network, Endpoints: t.Endpoints, Containers: t.Containers, Netns: t.Netns}
}

// TeardownParams removes a run's deployment (safe to repeat, and for a run
// this session did not deploy: found by its run id).
type TeardownParams struct {
	EngineRef
	RunID string `json:"run_id"`
}

// ExecParams runs argv in a deployed service.
type ExecParams struct {
	EngineRef
	RunID   string   `json:"run_id"`
	Service string   `json:"service"`
	Argv    []string `json:"argv"`
}

// ObserveParams starts sampling the host: every sampler of
// internal/observe, plus the cgroups of Containers.
type ObserveParams struct {
	// Key names the sampler set for observe.stop.
	Key        string              `json:"key"`
	Containers []observe.Container `json:"containers,omitempty"`
	// Pods are Kubernetes pods of the agent's node whose cgroups the agent
	// finds itself (the caller knows a pod's UID, not the node's cgroup
	// layout): see ResolvePods.
	Pods []PodCgroup `json:"pods,omitempty"`
	// Interval between samples (0: the observer's default, 1 s).
	Interval time.Duration `json:"interval_ns,omitempty"`
}

// PodCgroup names a pod whose cgroup is sampled as the series Name.
type PodCgroup struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// ObserveStarted is when sampling began, on the host's wall clock.
type ObserveStarted struct {
	UnixNano int64 `json:"unix_ns"`
}

// ObserveStop ends a sampler set; the result is its results.Series.
type ObserveStop struct {
	Key string `json:"key"`
}

// DriveParams runs a workload's driver against a target from this host.
// The knobs are decoded here by the workload (as the plan decoded them on
// the caller's side); the target's endpoints are addresses this host can
// dial.
type DriveParams struct {
	RunID      string           `json:"run_id"`
	Workload   string           `json:"workload"`
	Knobs      workload.Knobs   `json:"knobs"`
	Resources  engine.Resources `json:"resources,omitempty"`
	Window     workload.Window  `json:"window"`
	Target     Target           `json:"target"`
	LoadCPUSet string           `json:"load_cpuset,omitempty"`
	// StartAtUnixNano, when set, is the barrier of generators driven
	// together (client pods): the agent starts the driver (its warm-up,
	// then its window) at this instant of its own wall clock, so that
	// every generator's measured window starts at once. A start in the
	// past starts at once; EventStarted says when the window began.
	StartAtUnixNano int64 `json:"start_at_unix_ns,omitempty"`
}

// Started is EventStarted's data: the measured window began at UnixNano
// on the load host's wall clock.
type Started struct {
	UnixNano int64 `json:"unix_ns"`
}

// ImagesParams lists images by ID (sha256:…), with the references they
// must carry on the host.
type ImagesParams struct {
	Images []Image `json:"images"`
}

// Image is one image: its ID and references.
type Image struct {
	ID   string   `json:"id"`
	Refs []string `json:"refs,omitempty"`
}

// ImagesMissing are the images the host lacks (or whose references point
// elsewhere).
type ImagesMissing struct {
	Missing []Image `json:"missing,omitempty"`
}

// ChunksInFlight is how many image chunks a sender keeps unanswered; the
// agent answers them in order, one at a time, and refuses a chunk that
// finds more than four times as many waiting.
const ChunksInFlight = 4

// ImageChunk is a piece of a `docker save` archive. The chunks of one
// archive share Stream; the first names the images; Done ends it.
type ImageChunk struct {
	Stream string  `json:"stream"`
	Images []Image `json:"images,omitempty"`
	Data   []byte  `json:"data,omitempty"`
	Done   bool    `json:"done,omitempty"`
}

// ImageDisk names the block device of the host that holds a `docker save`
// archive of Images: the device whose serial (sysfs block/*/serial) is
// Serial, its first Size bytes.
type ImageDisk struct {
	Serial string  `json:"serial"`
	Size   int64   `json:"size"`
	Images []Image `json:"images"`
}

// ImageLoaded is the answer to the last chunk: what the host now has.
type ImageLoaded struct {
	Loaded []string `json:"loaded"`
}

// CleanParams are `ctrperf clean`'s on the host.
type CleanParams struct {
	RunID  string `json:"run_id,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// CleanResult is what the sweep removed (or would remove).
type CleanResult struct {
	Removed []string        `json:"removed,omitempty"`
	Found   []engine.Object `json:"found,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Conn reads and writes messages on one stream pair. Send may be called
// from many goroutines; Receive from one.
type Conn struct {
	mu     sync.Mutex // one line at a time
	framed sync.Mutex // one framed message at a time; lines pass between its frames
	w      *bufio.Writer
	sc     *bufio.Scanner
	frame  int // FrameSize unless WithFrameSize

	// The message being joined from frames.
	partial   []byte
	partialID uint64
}

// ConnOption changes a Conn.
type ConnOption func(*Conn)

// WithFrameSize sends messages longer than n bytes as frames and reads
// lines of frames of n bytes at most (FrameSize by default; both ends
// must agree). Tests take it small to send many frames quickly.
func WithFrameSize(n int) ConnOption {
	return func(c *Conn) {
		if n > 0 {
			c.frame = n
		}
	}
}

// NewConn frames messages on r and w.
func NewConn(r io.Reader, w io.Writer, opts ...ConnOption) *Conn {
	c := &Conn{w: bufio.NewWriterSize(w, 64<<10), sc: bufio.NewScanner(r), frame: FrameSize}
	for _, o := range opts {
		o(c)
	}
	c.sc.Buffer(make([]byte, min(64<<10, maxLine(c.frame))), maxLine(c.frame))
	return c
}

// Send writes one message and flushes it: one line, or frames when its
// JSON is longer than FrameSize.
func (c *Conn) Send(m *Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("agent protocol: encode message %d: %w", m.ID, err)
	}
	if len(b) <= c.frame {
		return c.line(b)
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("agent protocol: message %d is %d bytes, more than the %d a peer accepts", m.ID, len(b), MaxMessage)
	}
	c.framed.Lock()
	defer c.framed.Unlock()
	for len(b) > 0 {
		n := min(len(b), c.frame)
		f, err := json.Marshal(&Message{ID: m.ID, Frame: b[:n], More: n < len(b)})
		if err != nil {
			return err
		}
		if err := c.line(f); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (c *Conn) line(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	if err := c.w.WriteByte('\n'); err != nil {
		return err
	}
	return c.w.Flush()
}

// Receive reads the next message, joined from its frames; io.EOF at the
// end of the stream. A line that is no message, longer than MaxLine, or
// frames that do not make one message end the stream with an error.
func (c *Conn) Receive() (*Message, error) {
	for c.sc.Scan() {
		line := c.sc.Bytes()
		if len(line) == 0 {
			continue
		}
		m, err := decodeLine(line)
		if err != nil {
			return nil, err
		}
		if len(m.Frame) == 0 {
			if m.More {
				return nil, fmt.Errorf("agent protocol: message %d says more frames follow but is no frame", m.ID)
			}
			return m, nil
		}
		if c.partial != nil && m.ID != c.partialID {
			return nil, fmt.Errorf("agent protocol: a frame of message %d among those of message %d", m.ID, c.partialID)
		}
		if len(c.partial)+len(m.Frame) > MaxMessage {
			return nil, fmt.Errorf("agent protocol: message %d is longer than %d bytes", m.ID, MaxMessage)
		}
		c.partialID = m.ID
		c.partial = append(c.partial, m.Frame...)
		if m.More {
			continue
		}
		whole := c.partial
		c.partial = nil
		full, err := decodeLine(whole)
		if err != nil {
			return nil, err
		}
		if full.ID != m.ID || len(full.Frame) > 0 {
			return nil, fmt.Errorf("agent protocol: the frames of message %d join into another message (%d) or a frame", m.ID, full.ID)
		}
		return full, nil
	}
	if err := c.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("agent protocol: a line longer than %d bytes (a peer of another protocol version?): %w", maxLine(c.frame), err)
		}
		return nil, err
	}
	if c.partial != nil {
		return nil, fmt.Errorf("agent protocol: the stream ended inside message %d: %w", c.partialID, io.ErrUnexpectedEOF)
	}
	return nil, io.EOF
}

func decodeLine(line []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("agent protocol: a line that is no message (%.80q): %w", line, err)
	}
	return &m, nil
}

// Encode is v as a message's params, result or data.
func Encode(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Every protocol type marshals; a failure is a programming error
		// that the peer sees as a bad message rather than a crash here.
		b, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
	}
	return b
}

// Decode reads raw into v; empty raw leaves v as it is.
func Decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 || v == nil {
		return nil
	}
	return json.Unmarshal(raw, v)
}
