package daemon

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/client"
)

// SaveArchive is `docker save` of refs (or image IDs) on engine cli: a tar
// stream the caller closes.
func SaveArchive(ctx context.Context, cli *client.Client, refs ...string) (io.ReadCloser, error) {
	rc, err := cli.ImageSave(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("save images %v: %w", refs, err)
	}
	return rc, nil
}

// LoadArchive is `docker load` of a save archive on engine cli, failing
// with the first error the engine reports in its progress stream.
func LoadArchive(ctx context.Context, cli *client.Client, archive io.Reader) error {
	resp, err := cli.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load images: %w", err)
	}
	defer resp.Close()
	if err := loadStreamError(resp); err != nil {
		return fmt.Errorf("load images: %w", err)
	}
	return nil
}
