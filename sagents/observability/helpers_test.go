package observability_test

import "io/fs"

var fsPathErr = fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
