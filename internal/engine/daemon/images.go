package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/client"
)

// CopyImages copies images from one engine to another through ImageSave and
// ImageLoad: a private engine starts empty and no registry exists. Refs
// already present in to with the same image ID are skipped.
func CopyImages(ctx context.Context, from, to *Daemon, refs ...string) error {
	var missing []string
	want := map[string]string{}
	for _, ref := range refs {
		fi, err := from.cli.ImageInspect(ctx, ref)
		if err != nil {
			return fmt.Errorf("copy image %s: not in engine %s: %w", ref, from.name, err)
		}
		want[ref] = fi.ID
		if ti, err := to.cli.ImageInspect(ctx, ref); err == nil && ti.ID == fi.ID {
			continue
		}
		missing = append(missing, ref)
	}
	if len(missing) == 0 {
		return nil
	}
	rc, err := from.cli.ImageSave(ctx, missing)
	if err != nil {
		return fmt.Errorf("save images %v from engine %s: %w", missing, from.name, err)
	}
	defer rc.Close()
	resp, err := to.cli.ImageLoad(ctx, rc, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load images %v into engine %s: %w", missing, to.name, err)
	}
	defer resp.Close()
	if err := loadStreamError(resp); err != nil {
		return fmt.Errorf("load images %v into engine %s: %w", missing, to.name, err)
	}
	for _, ref := range missing {
		ti, err := to.cli.ImageInspect(ctx, ref)
		if err != nil || ti.ID != want[ref] {
			return fmt.Errorf("image %s did not arrive in engine %s with ID %s (got %q, %v)", ref, to.name, want[ref], ti.ID, err)
		}
	}
	return nil
}

// loadStreamError reads the JSON message stream of an image load and
// returns the first error in it.
func loadStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read load progress: %w", err)
		}
		if m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}
