package results

import (
	"encoding/base64"
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in microseconds from 1 µs to 10
// minutes with 3 significant digits, enough for a 60 s timeout and beyond.
const (
	HistMinUs   = 1
	HistMaxUs   = 10 * 60 * 1_000_000
	HistSigFigs = 3
)

// NewHistogram returns an empty latency histogram in microseconds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(HistMinUs, HistMaxUs, HistSigFigs)
}

// HistValue is d in microseconds, clamped to the histogram's range so that
// recording it cannot fail.
func HistValue(d time.Duration) int64 {
	return min(max(d.Microseconds(), HistMinUs), HistMaxUs)
}

// EncodeHistogram returns the compact base64 form stored in Operation.Histogram.
func EncodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodeHistogram parses what EncodeHistogram produced.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: base64: %w", err)
	}
	h, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}
