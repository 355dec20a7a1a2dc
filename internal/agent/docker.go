package agent

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine/daemon"
)

// DockerImages moves images into the engine cli speaks to.
func DockerImages(cli *client.Client) Images { return dockerImages{cli} }

type dockerImages struct{ cli *client.Client }

// Missing is every image whose ID the engine lacks; an image it has under
// another name only gets its references (no transfer).
func (d dockerImages) Missing(ctx context.Context, want []Image) ([]Image, error) {
	var missing []Image
	for _, im := range want {
		if _, err := d.cli.ImageInspect(ctx, im.ID); err != nil {
			missing = append(missing, im)
			continue
		}
		for _, ref := range im.Refs {
			if r, err := d.cli.ImageInspect(ctx, ref); err == nil && r.ID == im.ID {
				continue
			}
			if _, err := d.cli.ImageTag(ctx, client.ImageTagOptions{Source: im.ID, Target: ref}); err != nil {
				return nil, fmt.Errorf("tag %s as %s: %w", im.ID, ref, err)
			}
		}
	}
	return missing, nil
}

func (d dockerImages) Load(ctx context.Context, archive io.Reader) error {
	return daemon.LoadArchive(ctx, d.cli, archive)
}
