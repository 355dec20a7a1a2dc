package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// fuzzFrame is small so that the fuzzer's inputs reach frames, joins and
// the line limit.
const fuzzFrame = 64

// hostileStreams are what a peer of another build, a broken link or an
// attacker on the stream may send the agent's decoder.
var hostileStreams = []struct {
	desc, stream, want string
}{
	{"a line over the limit", strings.Repeat("x", maxLine(fuzzFrame)+1) + "\n", "longer than"},
	{"a line that is no JSON", "{\"id\":1,\n", "no message"},
	{"a truncated framed message", `{"id":3,"frame":"eyJpZCI6","more":true}` + "\n", "ended inside message 3"},
	{"a frame of another message among frames", `{"id":3,"frame":"eyJp","more":true}` + "\n" + `{"id":4,"frame":"eyJp"}` + "\n", "a frame of message 4 among those of message 3"},
	{"frames that join into no message", `{"id":3,"frame":"eyJp"}` + "\n", "no message"},
	{"frames that join into another id", `{"id":3,"frame":"` + b64(`{"id":9,"method":"clock"}`) + `"}` + "\n", "join into another message"},
	{"hello of protocol 1", `{"id":1,"method":"hello","params":{"version":1}}` + "\n", ""},
	{"an unknown method", `{"id":1,"method":"rm -rf /","params":{}}` + "\n", ""},
}

func b64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

// TestReceiveHostileStreams: every hostile stream ends in an error that
// says what was wrong, or decodes as a message the session then refuses
// (TestHelloRefusesAnotherVersion, the unknown method's CodeUnknownMethod).
func TestReceiveHostileStreams(t *testing.T) {
	for _, c := range hostileStreams {
		t.Run(c.desc, func(t *testing.T) {
			conn := NewConn(strings.NewReader(c.stream), io.Discard, WithFrameSize(fuzzFrame))
			var err error
			for err == nil {
				_, err = conn.Receive()
			}
			if c.want == "" {
				if !errors.Is(err, io.EOF) {
					t.Errorf("Receive = %v, want messages then EOF", err)
				}
				return
			}
			if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Receive = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// FuzzConnReceive: whatever arrives, Receive ends (in an error or EOF)
// without panicking, hands no frame to its caller, and what it hands on
// survives Send and Receive unchanged, in frames when it is long.
func FuzzConnReceive(f *testing.F) {
	for _, c := range hostileStreams {
		f.Add([]byte(c.stream))
	}
	var long bytes.Buffer
	_ = NewConn(nil, &long, WithFrameSize(fuzzFrame)).Send(&Message{ID: 5, Result: Encode(strings.Repeat("r", 300))})
	f.Add(long.Bytes())
	f.Add([]byte(`{"id":2,"event":"sample","data":{"t":1}}` + "\n" + `{"id":2,"result":null}` + "\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		conn := NewConn(bytes.NewReader(stream), io.Discard, WithFrameSize(fuzzFrame))
		for range len(stream) + 1 {
			m, err := conn.Receive()
			if err != nil {
				return
			}
			if len(m.Frame) > 0 || m.More {
				t.Fatalf("Receive handed on a frame: %+v", m)
			}
			want, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("a received message does not encode: %v", err)
			}
			var wire bytes.Buffer
			if err := NewConn(nil, &wire, WithFrameSize(fuzzFrame)).Send(m); err != nil {
				t.Fatalf("Send of a received message: %v", err)
			}
			back, err := NewConn(&wire, io.Discard, WithFrameSize(fuzzFrame)).Receive()
			if err != nil {
				t.Fatalf("Receive of a sent message: %v", err)
			}
			if got, _ := json.Marshal(back); !bytes.Equal(got, want) {
				t.Fatalf("round trip:\n got %s\nwant %s", got, want)
			}
		}
		t.Fatal("more messages than bytes")
	})
}
