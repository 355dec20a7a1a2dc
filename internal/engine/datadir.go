package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A service's data directory on the host, <root>/<run>/<service>, is
// written by whatever runs in the service: root in a container, or a user
// of the image (mysql, nobody), so the leaf may have to be writable by
// anyone. What reaches it must not be: <root> and <root>/<run> are 0700,
// so no other local user can get at what a container leaves there (a
// setuid shell, say). Inside a container the bind mount is the leaf
// itself, which no parent's mode affects.
const (
	dataParentMode = 0o700
	// dataLeafOpen is the leaf for a container's user, whoever that is.
	dataLeafOpen = 0o777
	// dataLeafRoot is the leaf for a host-runtime service, run as root.
	dataLeafRoot = 0o755
)

// makeDataDir makes <root>/<runID>/<service> with the parents closed
// (dataParentMode, also when they already exist from an older ctrperf)
// and the leaf with mode leaf, and returns its path.
func makeDataDir(root, runID, service string, leaf os.FileMode) (string, error) {
	runDir := filepath.Join(root, runID)
	if err := ensureDir(root, dataParentMode); err != nil {
		return "", err
	}
	if err := ensureDir(runDir, dataParentMode); err != nil {
		return "", err
	}
	if service == "" {
		return runDir, nil
	}
	dir := filepath.Join(runDir, service)
	if err := ensureDir(dir, leaf); err != nil {
		return "", err
	}
	return dir, nil
}

// ensureDir makes dir (missing directories above it as mkdir -p would)
// and sets its mode exactly, whatever the umask and whatever it was
// before.
func ensureDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, dataParentMode); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("set mode %#o on %s: %w", mode, dir, err)
	}
	return nil
}
