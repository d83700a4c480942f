package aioserver

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// A file error carries the C name of any errno it wraps, not only the
// common ones, and "E?" for a number without a name.
func TestFileErrorErrnoName(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "/w/a", Err: syscall.ENOENT}, "ENOENT"},
		{&fs.PathError{Op: "rename", Path: "/w/a", Err: syscall.EBUSY}, "EBUSY"},
		{fmt.Errorf("write: %w", syscall.EROFS), "EROFS"},
		{&fs.PathError{Op: "open", Path: "/w/a", Err: syscall.Errno(4095)}, "E?"},
	} {
		fe := fileError("op", "/w/a", tc.err)
		if fe.ErrnoName == nil || *fe.ErrnoName != tc.want {
			t.Errorf("fileError(%v).ErrnoName = %v, want %q", tc.err, fe.ErrnoName, tc.want)
		}
	}
}
