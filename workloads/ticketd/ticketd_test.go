package ticketd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc      string
		args      []string
		want      string
		wantUsage bool
	}{
		{"pool out of range", []string{"--pool", "0"}, "--pool 0: out of range", true},
		{"hash cost out of range", []string{"--hash-cost", "99"}, "--hash-cost 99", true},
		{"pool above max clients", []string{"--max-clients", "4", "--pool", "6"}, "larger than --max-clients", true},
		{"unknown database scheme", []string{"--db", "postgres://x"}, "want sqlite:PATH or mysql://", true},
		{"unknown journal", []string{"--sqlite-journal", "MEMORY"}, "--sqlite-journal", true},
		{"stray argument", []string{"extra"}, "unexpected arguments", true},
		{"port in use", []string{"--listen", busy.Addr().String(), "--data-dir", t.TempDir()}, "address already in use", false},
		{"data directory below a file", []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(file, "d")}, "data directory", false},
		{"database unreachable", []string{"--listen", "127.0.0.1:0", "--db", "mysql://u:p@127.0.0.1:1/x", "--db-wait", "600ms"}, "not reachable after 600ms", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var stderr bytes.Buffer
			err := Run(context.Background(), tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			var ue usageError
			if errors.As(err, &ue) != tc.wantUsage {
				t.Errorf("usage error = %v, want %v (exit status 2 only for bad flags)", !tc.wantUsage, tc.wantUsage)
			}
		})
	}
}

func TestRunServesAndStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	for round := range 2 { // the second start reuses the seeded data
		ctx, cancel := context.WithCancel(context.Background())
		stderr := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--hash-cost", "4", "--seed-users", "3", "--seed-projects", "2", "--seed-tickets", "5"}, stderr)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stderr.String(), "ready") && time.Now().Before(deadline) {
			select {
			case err := <-done:
				t.Fatalf("round %d: run ended early: %v\n%s", round, err, stderr.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: run after cancel: %v", round, err)
		}
		want := "added 3 users, 2 projects, 10 tickets"
		if round == 1 {
			want = "added 0 users, 0 projects, 0 tickets"
		}
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("round %d: log lacks %q:\n%s", round, want, stderr.String())
		}
	}
}

// syncBuffer is a bytes.Buffer the server's logger and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
