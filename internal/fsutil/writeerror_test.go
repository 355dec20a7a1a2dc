package fsutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestWriteErrorNamesFileAndErrno(t *testing.T) {
	tmp := &os.PathError{Op: "write", Path: "/out/.env.json.tmp-123", Err: syscall.ENOSPC}
	tests := []struct {
		desc string
		err  error
		want string
		is   error
	}{
		{"full disk, from a temporary file", NewWriteError("/out/env.json", "write", tmp),
			"out of space writing /out/env.json: write: no space left on device (ENOSPC)", syscall.ENOSPC},
		{"quota", NewWriteError("/out/plan.yaml", "write", syscall.EDQUOT),
			"out of space writing /out/plan.yaml: write: disk quota exceeded (EDQUOT)", syscall.EDQUOT},
		{"read-only", NewWriteError("/out/meta.json", "create temporary file", &os.PathError{Op: "open", Path: "/out/.x", Err: syscall.EROFS}),
			"read-only file system writing /out/meta.json: create temporary file: read-only file system (EROFS)", syscall.EROFS},
		{"failing disk on fsync", Explain(fmt.Errorf("wrapped: %w", &os.PathError{Op: "sync", Path: "/out/results.jsonl", Err: syscall.EIO})),
			"I/O error writing /out/results.jsonl: sync: input/output error (EIO)", syscall.EIO},
		{"rename over a directory", NewWriteError("/out/env.json", "replace", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.EISDIR}),
			"replace /out/env.json: is a directory (EISDIR)", syscall.EISDIR},
		{"an explained error is kept as it is", NewWriteError("/elsewhere", "append", NewWriteError("/out/x", "write", syscall.ENOSPC)),
			"out of space writing /out/x: write: no space left on device (ENOSPC)", syscall.ENOSPC},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if tt.err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", tt.err, tt.want)
			}
			if !errors.Is(tt.err, tt.is) {
				t.Errorf("errors.Is(%v) = false", tt.is)
			}
		})
	}
	if err := Explain(errors.New("plain")); err.Error() != "plain" {
		t.Errorf("Explain changed an error without a path: %v", err)
	}
	if NewWriteError("/x", "write", nil) != nil || Explain(nil) != nil {
		t.Error("nil is not kept nil")
	}
}
