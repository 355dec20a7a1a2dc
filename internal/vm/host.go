package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"ctrperf/internal/image"
)

// ThisMachine is what boots guests here: QEMU and qemu-img on PATH, the
// installed guest kernel, the ctrperf binary self, and the base disk made
// from the debian-base rootfs tarball in image's cache (a guest with
// Docker: the debian-docker rootfs, debootstrapped on first use).
func ThisMachine(self, runID string, log io.Writer) (*Machine, error) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errNoQEMU
	}
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		return nil, fmt.Errorf("qemu-img not installed (Debian package qemu-utils)")
	}
	if log == nil {
		log = io.Discard
	}
	k, err := FindKernel("/boot", "/lib/modules")
	if err != nil {
		return nil, err
	}
	// Missing, disk: virtiofs says so when a guest asks for it.
	virtiofsd, _ := FindVirtiofsd(exec.LookPath, func(p string) bool { _, err := os.Stat(p); return err == nil })
	m := &Machine{QEMU: qemu, QEMUImg: qemuImg, Virtiofsd: virtiofsd, Kernel: k, Self: self, RunID: runID, Log: log}
	m.BaseDisk = func(ctx context.Context) (string, error) {
		hash, err := image.BaseHash(image.DebianBase)
		if err != nil {
			return "", fmt.Errorf("guest disk: %w", err)
		}
		tarball := filepath.Join(image.CacheDir(), image.DebianBase.Name+"-"+hash+".tar")
		return BaseDisk(ctx, image.DebianBase.Name, tarball, hash, filepath.Join(m.dataDir(), "cache"), log)
	}
	m.DockerDisk = func(ctx context.Context) (string, error) {
		tarball, hash, err := image.BaseTarball(ctx, image.GuestDocker, image.WithProgress(log))
		if err != nil {
			return "", fmt.Errorf("guest disk with Docker: %w", err)
		}
		return BaseDisk(ctx, image.GuestDocker.Name, tarball, hash, filepath.Join(m.dataDir(), "cache"), log)
	}
	return m, nil
}

func (m *Machine) dataDir() string {
	if m.DataDir == "" {
		return DataDir
	}
	return m.DataDir
}
