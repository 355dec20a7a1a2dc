// Package fsutil holds the file-system helpers shared by the packages that
// keep state on disk (checkpoints, engine state, reports).
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader, or the file
// system after a crash or power loss, sees either the old file or the new
// one, never a mix or an empty file.
//
// The data goes to a temporary file in path's directory (a rename is only
// atomic within one file system), which is given perm, fsync'd and closed,
// then renamed over path; the directory is fsync'd last so that the rename
// itself survives a crash. perm is applied as given, like chmod, not masked
// by the umask. A symlink at path is replaced, not followed; the temporary
// file is created with O_CREAT|O_EXCL (os.CreateTemp), which fails rather
// than follow a symlink planted at its name. The directory itself is
// trusted as given: check a shared one first (CheckDir). On any failure
// the temporary file is removed and path keeps its old content; only a
// failure of the final directory sync leaves the new content in place
// (possibly not yet durable). Errors are *WriteError naming path.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeAtomic(path, data, perm, true)
}

// ReplaceFile is WriteFileAtomic without the syncs: readers never see a
// partial file, but a crash may lose the new content. For files rewritten
// often whose loss costs nothing (a status snapshot every second).
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	return writeAtomic(path, data, perm, false)
}

func writeAtomic(path string, data []byte, perm os.FileMode, durable bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return NewWriteError(path, "create temporary file", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil && !renamed {
			f.Close() // a second Close after a failed one only returns an error
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return NewWriteError(path, "write", err)
	}
	// Chmod through the descriptor before the sync, so that the mode is
	// as durable as the data.
	if err := f.Chmod(perm); err != nil {
		return NewWriteError(path, fmt.Sprintf("chmod %v", perm), err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return NewWriteError(path, "sync", err)
		}
	}
	if err := f.Close(); err != nil {
		return NewWriteError(path, "close", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return NewWriteError(path, "replace", err)
	}
	renamed = true
	if !durable {
		return nil
	}
	if err := syncDir(dir); err != nil {
		return NewWriteError(path, "sync directory", err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
