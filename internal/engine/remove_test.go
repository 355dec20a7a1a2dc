package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// fakeRemover answers ContainerRemove with err and reports the container
// gone after inspects more inspections.
type fakeRemover struct {
	err      error
	inspects int
	seen     int
}

func (f *fakeRemover) ContainerRemove(context.Context, string, client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	return client.ContainerRemoveResult{}, f.err
}

func (f *fakeRemover) ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.seen++
	if f.seen > f.inspects {
		return client.ContainerInspectResult{}, cerrdefs.ErrNotFound
	}
	return client.ContainerInspectResult{}, nil
}

func TestRemoveContainer(t *testing.T) {
	inProgress := cerrdefs.ErrConflict.WithMessage("removal of container abc is already in progress")
	tests := []struct {
		desc    string
		f       *fakeRemover
		timeout time.Duration
		wantErr string
	}{
		{"removed", &fakeRemover{}, time.Second, ""},
		{"already gone", &fakeRemover{err: cerrdefs.ErrNotFound}, time.Second, ""},
		{"removal in progress (a killed teardown's): waited for", &fakeRemover{err: inProgress, inspects: 3}, time.Second, ""},
		{"removal in progress that never ends: bounded by ctx", &fakeRemover{err: inProgress, inspects: 1 << 30}, 50 * time.Millisecond, "still being removed"},
		{"another failure", &fakeRemover{err: errors.New("device busy")}, time.Second, "device busy"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			err := removeContainer(ctx, tt.f, "abc", time.Millisecond)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
