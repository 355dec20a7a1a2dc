package image

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
)

// listManaged lists the images on the engine that carry LabelManaged.
func listManaged(ctx context.Context, api API) ([]image.Summary, error) {
	list, err := api.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("label", LabelManaged+"=true")})
	if err != nil {
		return nil, fmt.Errorf("list ctrperf images: %w", err)
	}
	return list.Items, nil
}

// Remove removes ctrperf's images from the engine: those whose LabelName is
// one of names, or every image labelled LabelManaged when names is empty.
// Each tag is removed on its own (an image tagged <hash> and latest goes
// when its last tag does). It returns the tags and IDs it removed; an image
// that cannot go (a container still uses it) is an error in the joined
// error, and the others are still removed.
func Remove(ctx context.Context, api API, names []string) ([]string, error) {
	list, err := listManaged(ctx, api)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var removed []string
	var errs []error
	matched := map[string]bool{}
	for _, s := range list {
		name := s.Labels[LabelName]
		if len(want) > 0 && !want[name] {
			continue
		}
		matched[name] = true
		targets := s.RepoTags
		if len(targets) == 0 {
			targets = []string{s.ID}
		}
		for _, t := range targets {
			if _, err := api.ImageRemove(ctx, t, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
				errs = append(errs, fmt.Errorf("remove image %s (%s): %w", t, name, err))
				continue
			}
			removed = append(removed, t)
		}
	}
	for _, n := range names {
		if !matched[n] {
			errs = append(errs, fmt.Errorf("no ctrperf image named %q on this engine", n))
		}
	}
	return removed, errors.Join(errs...)
}
