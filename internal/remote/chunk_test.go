package remote

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"ctrperf/internal/agent"
)

// imageMessage is the agent message of one image chunk as send makes it:
// a full chunk of data, and on the first the images it names.
func imageMessage(t testing.TB, id uint64, data []byte, images []agent.Image) *agent.Message {
	t.Helper()
	ch := agent.ImageChunk{Stream: "sha256:" + strings.Repeat("f", 64) + "-12", Images: images, Data: data, Done: true}
	params, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Message{ID: id, Method: agent.MethodImagesLoad, Params: params}
}

// TestImageChunkIsOneLine: a full image chunk, with a dozen images named
// on it, is one line of the agent protocol, not frames (which would base64
// it a second time).
func TestImageChunkIsOneLine(t *testing.T) {
	var images []agent.Image
	for i := range 12 {
		images = append(images, agent.Image{ID: "sha256:" + strings.Repeat("a", 64),
			Refs: []string{fmt.Sprintf("ctrperf/some-rather-long-image-name-%d:%s", i, strings.Repeat("b", 16))}})
	}
	b, err := json.Marshal(imageMessage(t, 1<<62, make([]byte, imageChunk), images))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > agent.FrameSize {
		t.Errorf("an image chunk of %d bytes is a message of %d bytes, more than a line's %d: it goes as frames, base64 twice", imageChunk, len(b), agent.FrameSize)
	}
	if imageChunk < agent.FrameSize/2 {
		t.Errorf("image chunks of %d bytes: more round trips than needed", imageChunk)
	}
}

// BenchmarkImageChunks sends a `docker save` stream's chunks through an
// agent connection and decodes them as the host does: chunks that fit one
// line against the 1 MiB chunks that went as frames until 2026-11-29.
func BenchmarkImageChunks(b *testing.B) {
	for _, size := range []int{1 << 20, imageChunk} {
		b.Run(fmt.Sprintf("chunk=%d", size), func(b *testing.B) {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i * 7)
			}
			m := imageMessage(b, 1, data, nil)
			pr, pw := io.Pipe()
			wire := &countingWriter{w: pw}
			tx, rx := agent.NewConn(nil, wire), agent.NewConn(pr, io.Discard)
			go func() {
				for range b.N {
					if err := tx.Send(m); err != nil {
						pw.CloseWithError(err)
						return
					}
				}
				pw.Close()
			}()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				got, err := rx.Receive()
				if err != nil {
					b.Fatal(err)
				}
				var ch agent.ImageChunk
				if err := json.Unmarshal(got.Params, &ch); err != nil || len(ch.Data) != size {
					b.Fatalf("chunk of %d bytes, %v", len(ch.Data), err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(wire.n.Load())/float64(b.N*size), "wire-bytes/B")
		})
	}
}

type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
