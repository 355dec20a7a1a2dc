package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Disks are a host's block devices as sysfs lists them: each
// <Sys>/block/<name> with its serial (virtio-blk's, as QEMU's serial=
// gave it), opened as <Dev>/<name>. A disk hot-plugged a moment ago is
// waited for: the guest's kernel adds it when it handles the hot-plug.
type Disks struct {
	Sys, Dev string // /sys and /dev
	// Wait bounds the wait for a disk that is not there yet (default 1 min).
	Wait time.Duration
}

// Open opens the disk whose serial is serial, waiting for it while it is
// not there, at most d.Wait.
func (d Disks) Open(ctx context.Context, serial string) (*os.File, error) {
	wait := d.Wait
	if wait == 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		name, err := diskBySerial(filepath.Join(d.Sys, "block"), serial)
		if err == nil {
			return os.Open(filepath.Join(d.Dev, name))
		}
		if !errors.Is(err, errNoDisk) || !time.Now().Before(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errNoDisk = errors.New("no such disk")

// diskBySerial is the name of the block device under blockDir (sysfs
// block/) whose serial file says serial.
func diskBySerial(blockDir, serial string) (string, error) {
	if serial == "" {
		return "", errors.New("a disk without a serial")
	}
	entries, err := os.ReadDir(blockDir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(blockDir, e.Name(), "serial"))
		if err != nil {
			continue // a disk without a serial (a loop device, an NVMe's is under device/)
		}
		if strings.TrimSpace(string(b)) == serial {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("%w with serial %q in %s", errNoDisk, serial, blockDir)
}

// imageDisk loads the archive on the disk p names into the host's
// engine, then checks that every image arrived, as the last chunk of a
// stream does.
func (s *session) imageDisk(ctx context.Context, p ImageDisk) outcome {
	if s.opt.Disks == nil {
		return fail(&Error{Code: CodeNoEngine, Message: "this agent loads no images from disks"})
	}
	if p.Size <= 0 {
		return fail(&Error{Code: CodeBadParams, Message: fmt.Sprintf("image disk %q of %d bytes", p.Serial, p.Size)})
	}
	im, err := s.images(ctx)
	if err != nil {
		return fail(err)
	}
	f, err := s.opt.Disks.Open(ctx, p.Serial)
	if err != nil {
		return fail(fmt.Errorf("load images: %w", err))
	}
	defer f.Close()
	if err := im.Load(ctx, io.LimitReader(f, p.Size)); err != nil {
		return fail(fmt.Errorf("load images from %s: %w", f.Name(), err))
	}
	return s.arrived(ctx, p.Images)
}
