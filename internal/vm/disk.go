package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// baseDiskFormat versions how a base disk is made from its rootfs: a
// change here makes new disks of unchanged tarballs.
const baseDiskFormat = "ext4-1"

// baseDiskSize is the base disk's size: the Debian base (about 0.9 GB)
// and room for what a run writes (fio's files, a database). Sparse: it
// takes what the rootfs takes.
const baseDiskSize = 8 << 30

// BaseDisk is the guest's root disk made from the rootfs tarball of
// recipe name and hash (internal/image's debian-base, or debian-docker
// for a guest with Docker): a raw ext4 image in cacheDir, made once
// (extract, then mkfs.ext4 -d, about half a minute) and shared read-only
// by every guest through its own overlay. Concurrent makers wait for each
// other through a lock file.
func BaseDisk(ctx context.Context, name, tarball, hash, cacheDir string, progress io.Writer) (string, error) {
	disk := filepath.Join(cacheDir, fmt.Sprintf("%s-%s-%s.raw", name, hash, baseDiskFormat))
	if _, err := os.Stat(disk); err == nil {
		return disk, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, "base-disk.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(disk); err == nil {
		return disk, nil
	}
	if _, err := os.Stat(tarball); err != nil {
		return "", fmt.Errorf("guest disk: the %s rootfs %s: %w (`ctrperf images build debian-base --force` makes debian-base's again: debootstrap, about 90 s)", name, tarball, err)
	}
	start := time.Now()
	fmt.Fprintf(progress, "vm: making the guest's base disk %s from %s (once, about half a minute)\n", disk, tarball)
	root := disk + ".rootfs"
	_ = os.RemoveAll(root)
	defer os.RemoveAll(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "tar", "--numeric-owner", "-xpf", tarball, "-C", root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("guest disk: extract %s: %w: %s", tarball, err, strings.TrimSpace(string(out)))
	}
	// What a container gets from its engine and a guest from nobody.
	for f, content := range map[string]string{
		"etc/hostname": "ctrperf-guest\n",
		"etc/hosts":    "127.0.0.1\tlocalhost ctrperf-guest\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"etc/fstab":    "# ctrperf's guest: its init mounts what it needs\n",
	} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("guest disk: %w", err)
		}
	}
	tmp := disk + ".tmp"
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Truncate(tmp, baseDiskSize); err != nil {
		return "", err
	}
	// Inode tables and the journal written now, not by a kernel thread of
	// the guest while a run measures its disk.
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "ctrperf-root", "-E", "lazy_itable_init=0,lazy_journal_init=0", "-d", root, tmp)
	if out, err := mkfs.CombinedOutput(); err != nil {
		return "", fmt.Errorf("guest disk: mkfs.ext4 -d %s: %w: %s", root, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, disk); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "vm: base disk ready after %s\n", time.Since(start).Round(time.Second))
	return disk, nil
}

// Initramfs is the guest's initramfs for this ctrperf binary and kernel,
// in cacheDir (made when missing: the binary's copy and the modules).
func Initramfs(self string, k Kernel, cacheDir string) (string, error) {
	r, err := newInitramfs(self, k)
	if err != nil {
		return "", fmt.Errorf("guest initramfs: %w", err)
	}
	h, err := r.hash()
	if err != nil {
		return "", fmt.Errorf("guest initramfs: %w", err)
	}
	path := filepath.Join(cacheDir, "initramfs-"+h+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	// Older ones are of other binaries.
	old, _ := filepath.Glob(filepath.Join(cacheDir, "initramfs-*.cpio"))
	tmp, err := os.CreateTemp(cacheDir, ".initramfs-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := r.write(tmp); err != nil {
		tmp.Close()
		return "", fmt.Errorf("guest initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	for _, o := range old {
		// A guest booting from one has read it (QEMU loads the initramfs
		// into the guest's memory at start); one of the last hour may be
		// another binary's about to boot.
		if fi, err := os.Stat(o); err == nil && time.Since(fi.ModTime()) > time.Hour {
			_ = os.Remove(o)
		}
	}
	return path, nil
}

// overlay makes a guest's copy-on-write disk over base.
func overlay(ctx context.Context, qemuImg, base, path string) error {
	out, err := exec.CommandContext(ctx, qemuImg, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("guest overlay %s: qemu-img create: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting while ctx lives.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
