package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/remote"
)

// A guest with Docker gets the images its engine lacks on a disk: the
// `docker save` archive written to a file of the guest's data directory,
// attached to the running guest as a read-only raw virtio-blk disk
// (hot-plugged through QMP), and `docker load`ed there by the agent
// (images.load.disk), which finds the disk by its serial. The agent's
// stream of chunks carries about 1 MB/s into a guest on an emulated CPU
// (each chunk base64 in JSON, framed in base64 again, decoded by the
// emulated CPU); the disk about 130 MB/s, so the guest's dockerd's own
// load (about 5 MB/s under TCG here) is what is left. The file is
// removed once QEMU has opened it, so nothing of it outlives QEMU; a
// crash before that leaves it in the guest's data directory, which
// Shutdown and clean remove with the overlay.

// shipPrefix names a shipment's file, QEMU drive and disk serial, with
// its number in the guest (virtio-blk's serial holds 20 bytes).
const shipPrefix = "ctrperf-ship-"

// Shipment is one archive shipped into a guest's engine on a disk, and
// where its time went.
type Shipment struct {
	Images []string // their IDs
	Bytes  int64
	// Save is `docker save` into the file, Attach the hot-plug, Load the
	// guest's `docker load` from the disk (with the wait for the guest to
	// see it), Detach the unplug.
	Save, Attach, Load, Detach time.Duration
}

var _ remote.Shipper = (*Guest)(nil)

// Ship writes archive to a file of the guest's, attaches it to the guest
// as a disk, has c's agent load the images from it, and detaches it.
func (g *Guest) Ship(ctx context.Context, c *remote.Client, images []agent.Image, archive io.Reader) error {
	g.mu.Lock()
	g.ships++
	id := fmt.Sprintf("%s%d", shipPrefix, g.ships)
	g.mu.Unlock()
	path := filepath.Join(g.DataDir, id+".tar")
	add, err := driveAdd(id, path)
	if err != nil {
		return fmt.Errorf("guest %s: %w", g.Name, err)
	}
	sh := Shipment{}
	for _, im := range images {
		sh.Images = append(sh.Images, im.ID)
	}
	defer os.Remove(path) // gone already unless the attach failed
	start := time.Now()
	if sh.Bytes, err = writeArchive(path, archive); err != nil {
		return fmt.Errorf("guest %s: %w", g.Name, err)
	}
	sh.Save = time.Since(start)
	start = time.Now()
	if err := g.attach(ctx, id, add); err != nil {
		return err
	}
	// QEMU holds it open: the disk's bytes live as long as QEMU, no longer.
	_ = os.Remove(path)
	sh.Attach = time.Since(start)
	start = time.Now()
	lerr := c.Call(ctx, agent.MethodImagesLoadDisk, agent.ImageDisk{Serial: id, Size: sh.Bytes, Images: images}, nil, nil)
	sh.Load = time.Since(start)
	start = time.Now()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	derr := g.detach(dctx, id)
	sh.Detach = time.Since(start)
	if lerr != nil {
		return errors.Join(fmt.Errorf("guest %s: load images from disk %s: %w", g.Name, id, lerr), derr)
	}
	g.mu.Lock()
	g.shipments = append(g.shipments, sh)
	g.mu.Unlock()
	fmt.Fprintf(g.log, "vm: shipped %d MB of images into guest %s's engine on a disk: docker save %s, attach %s, docker load in the guest %s, detach %s\n",
		sh.Bytes/1e6, g.Name, sh.Save.Round(100*time.Millisecond), sh.Attach.Round(100*time.Millisecond), sh.Load.Round(100*time.Millisecond), sh.Detach.Round(100*time.Millisecond))
	if derr != nil {
		// The images are in; the disk goes with QEMU.
		fmt.Fprintf(g.log, "vm: warning: %v\n", derr)
	}
	return nil
}

// Shipments are the archives shipped into the guest so far.
func (g *Guest) Shipments() []Shipment {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.shipments)
}

// writeArchive writes archive to a new file at path and says its size.
func writeArchive(path string, archive io.Reader) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("image archive: %w", err)
	}
	n, err := io.Copy(f, archive)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("image archive %s: %w", path, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("image archive %s: empty", path)
	}
	return n, nil
}

// driveAdd is the HMP command that opens path as drive id: raw,
// read-only. HMP splits its arguments at blanks, and QEMU's options at
// commas (doubled in a value).
func driveAdd(id, path string) (string, error) {
	if strings.ContainsAny(path, " \t\n\"'\\") {
		return "", fmt.Errorf("image archive %q: a path with blanks or quotes cannot be attached through QEMU's monitor", path)
	}
	return fmt.Sprintf("drive_add 0 if=none,id=%s,file=%s,format=raw,readonly=on", id, strings.ReplaceAll(path, ",", ",,")), nil
}

// attach opens the drive (add, driveAdd's command) and plugs it into the
// guest as a virtio-blk disk whose serial is id; a drive whose disk
// could not be plugged is closed again.
func (g *Guest) attach(ctx context.Context, id, add string) error {
	out, err := hmp(ctx, g.qmp(), add)
	if err == nil && strings.TrimSpace(out) != "OK" {
		err = errorText(out)
	}
	if err != nil {
		return fmt.Errorf("guest %s: open the image archive as drive %s: %w", g.Name, id, err)
	}
	out, err = hmp(ctx, g.qmp(), fmt.Sprintf("device_add virtio-blk-pci,drive=%s,id=%s,serial=%s", id, id, id))
	if err == nil {
		err = errorText(out) // device_add says nothing when it worked
	}
	if err != nil {
		_, derr := hmp(context.WithoutCancel(ctx), g.qmp(), "drive_del "+id)
		return errors.Join(fmt.Errorf("guest %s: attach the image archive as disk %s: %w", g.Name, id, err), derr)
	}
	return nil
}

// detach unplugs disk id and waits until QEMU has dropped its drive (the
// guest's kernel acknowledges the unplug first).
func (g *Guest) detach(ctx context.Context, id string) error {
	out, err := hmp(ctx, g.qmp(), "device_del "+id)
	if err == nil {
		err = errorText(out)
	}
	if err != nil {
		return fmt.Errorf("guest %s: detach disk %s: %w", g.Name, id, err)
	}
	for {
		out, err := hmp(ctx, g.qmp(), "info block")
		if err != nil {
			return fmt.Errorf("guest %s: detach disk %s: %w", g.Name, id, err)
		}
		if !hasDrive(out, id) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest %s: disk %s still attached: %w", g.Name, id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hasDrive says whether `info block`'s output lists drive id (each drive
// a line "ID (#blockN): FILE (FORMAT...)", its details indented below).
func hasDrive(infoBlock, id string) bool {
	for _, l := range strings.Split(infoBlock, "\n") {
		if name, _, ok := strings.Cut(l, " "); ok && name == id {
			return true
		}
	}
	return false
}
