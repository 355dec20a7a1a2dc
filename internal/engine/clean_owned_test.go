package engine

import (
	"context"
	"errors"
	"reflect"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeCleanAPI is the part of an engine cleanDocker uses: containers made
// from images with labels; no networks, no volumes.
type fakeCleanAPI struct {
	client.APIClient
	containers []container.Summary
	images     map[string]map[string]string // image id → its labels; absent: not found
	inspectErr error
	inspected  int
	removed    []string
}

func (f *fakeCleanAPI) ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error) {
	return client.ContainerListResult{Items: f.containers}, nil
}

func (f *fakeCleanAPI) ImageInspect(_ context.Context, id string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	f.inspected++
	if f.inspectErr != nil {
		return client.ImageInspectResult{}, f.inspectErr
	}
	l, ok := f.images[id]
	if !ok {
		return client.ImageInspectResult{}, cerrdefs.ErrNotFound
	}
	return client.ImageInspectResult{InspectResponse: image.InspectResponse{ID: id,
		Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: l}}}}, nil
}

func (f *fakeCleanAPI) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.removed = append(f.removed, id)
	return client.ContainerRemoveResult{}, nil
}

func (f *fakeCleanAPI) NetworkList(context.Context, client.NetworkListOptions) (client.NetworkListResult, error) {
	return client.NetworkListResult{}, nil
}

func (f *fakeCleanAPI) VolumeList(context.Context, client.VolumeListOptions) (client.VolumeListResult, error) {
	return client.VolumeListResult{}, nil
}

// Clean takes a container for ctrperf's only when ctrperf's create set its
// run label, never because an image passed ctrperf.managed on (issue 24:
// `docker run ctrperf/debian-base` was removed as an orphan).
func TestCleanTakesOnlyContainersCtrperfCreated(t *testing.T) {
	ctrperfImage := map[string]string{LabelManaged: "true", "ctrperf.image": "debian-base"}
	runImage := map[string]string{LabelManaged: "true", LabelRun: "r1"} // a test image built with a run label
	images := map[string]map[string]string{"sha256:base": ctrperfImage, "sha256:run": runImage}
	merge := func(img map[string]string, set map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range img {
			out[k] = v
		}
		for k, v := range set {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		desc       string
		c          container.Summary
		inspectErr error
		want       []string
		wantErr    bool
	}{
		{desc: "the user's container from ctrperf/debian-base is not ctrperf's",
			c: container.Summary{ID: "user-own-0123456789", Names: []string{"/user-own"}, ImageID: "sha256:base", Labels: merge(ctrperfImage, nil)}},
		{desc: "a container ctrperf created for a run is removed",
			c:    container.Summary{ID: "ctrperf-r1-app-0123", Names: []string{"/ctrperf-r1-app"}, ImageID: "sha256:base", Labels: merge(ctrperfImage, RunLabels("r1"))},
			want: []string{"container ctrperf-r1-app"}},
		{desc: "a run label the image passed on is not ctrperf's create",
			c: container.Summary{ID: "user-two-0123456789", Names: []string{"/user-two"}, ImageID: "sha256:run", Labels: merge(runImage, nil)}},
		{desc: "a run's own label over an image with another run's is ctrperf's",
			c:    container.Summary{ID: "ctrperf-r2-app-0123", Names: []string{"/ctrperf-r2-app"}, ImageID: "sha256:run", Labels: merge(runImage, RunLabels("r2"))},
			want: []string{"container ctrperf-r2-app"}},
		{desc: "an image the engine lost passed nothing on",
			c:    container.Summary{ID: "ctrperf-r3-app-0123", Names: []string{"/ctrperf-r3-app"}, ImageID: "sha256:gone", Labels: RunLabels("r3")},
			want: []string{"container ctrperf-r3-app"}},
		{desc: "an image that cannot be read keeps the container, with an error",
			c:          container.Summary{ID: "ctrperf-r4-app-0123", Names: []string{"/ctrperf-r4-app"}, ImageID: "sha256:base", Labels: merge(ctrperfImage, RunLabels("r4"))},
			inspectErr: errors.New("engine hiccup"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, dry := range []bool{true, false} {
				f := &fakeCleanAPI{containers: []container.Summary{tc.c}, images: images, inspectErr: tc.inspectErr}
				got, err := cleanDocker(context.Background(), f, "", dry, nil)
				if (err != nil) != tc.wantErr {
					t.Fatalf("dry %v: err = %v, want error %v", dry, err, tc.wantErr)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("dry %v: cleaned %q, want %q", dry, got, tc.want)
				}
				if wantRemoved := len(tc.want) > 0 && !dry; wantRemoved != (len(f.removed) == 1) || (!wantRemoved && len(f.removed) > 0) {
					t.Errorf("dry %v: removed %q", dry, f.removed)
				}
			}
		})
	}

	// One image inspection per image, however many containers use it.
	f := &fakeCleanAPI{images: images}
	for _, n := range []string{"a", "b", "c"} {
		f.containers = append(f.containers, container.Summary{ID: "ctrperf-" + n + "-0123456789", ImageID: "sha256:base", Labels: merge(ctrperfImage, RunLabels(n))})
	}
	if got, err := cleanDocker(context.Background(), f, "", true, nil); err != nil || len(got) != 3 || f.inspected != 1 {
		t.Errorf("cleaned %q (%v) with %d image inspections, want 3 with 1", got, err, f.inspected)
	}
}
