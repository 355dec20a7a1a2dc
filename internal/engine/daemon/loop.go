package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
)

// mkfsArgs is the mkfs command for a loop image; quiet and forced because the
// file is ours and fresh.
func mkfsArgs(fs, image string) []string {
	switch fs {
	case "ext4":
		// Lazy init keeps mkfs of a 20 GiB sparse file under a second.
		return []string{"mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", image}
	case "xfs":
		return []string{"mkfs.xfs", "-q", "-f", image}
	default:
		return []string{"mkfs." + fs, "-q", "-f", image}
	}
}

func runTool(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// setUpLoop creates the sparse image, makes the filesystem, attaches a loop
// device and mounts it. It records each step in st.Loop (and the state file)
// before doing it, so teardown can undo exactly what happened.
func setUpLoop(ctx context.Context, o Options, st *State, size int64) error {
	l := st.Loop
	if err := makeLoopImage(ctx, l, size, mkfsArgs(l.FS, l.Image)); err != nil {
		return err
	}
	dev, err := runTool(ctx, "losetup", "--find", "--show", l.Image)
	if err != nil {
		return fmt.Errorf("attach loop device: %w", err)
	}
	l.Device = dev
	if err := writeState(o, st); err != nil {
		return err
	}
	if err := os.MkdirAll(l.Mount, 0o700); err != nil {
		return fmt.Errorf("create mount point %s: %w", l.Mount, err)
	}
	if err := unix.Mount(dev, l.Mount, l.FS, 0, ""); err != nil {
		return fmt.Errorf("mount %s (%s on %s) at %s: %w", dev, l.FS, l.Image, l.Mount, err)
	}
	return nil
}

// loopBackingFile is the file a loop device is attached to, "" if none.
func loopBackingFile(fs kernel.FS, dev string) string {
	b, err := os.ReadFile(fs.Sys("block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loopDevicesOf lists the loop devices attached to files below dir.
func loopDevicesOf(fs kernel.FS, dir string) map[string]string {
	out := map[string]string{}
	ents, _ := os.ReadDir(fs.Sys("block"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		bf := loopBackingFile(fs, e.Name())
		// The kernel appends " (deleted)" when the file is gone.
		bf = strings.TrimSuffix(bf, " (deleted)")
		if bf != "" && kernel.PathUnder(bf, dir) {
			out["/dev/"+e.Name()] = bf
		}
	}
	return out
}

// detachLoop detaches dev only if it is still attached to image, so a device
// number reused by someone else is never touched.
func detachLoop(ctx context.Context, fs kernel.FS, dev, image string) (bool, error) {
	bf := strings.TrimSuffix(loopBackingFile(fs, dev), " (deleted)")
	if bf == "" || bf != image {
		return false, nil
	}
	if _, err := runTool(ctx, "losetup", "--detach", dev); err != nil {
		return false, fmt.Errorf("detach loop device %s of %s: %w", dev, image, err)
	}
	return true, nil
}
