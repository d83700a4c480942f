package tools

import (
	"errors"
	"io/fs"
)

func isNotExist(err error) bool   { return errors.Is(err, fs.ErrNotExist) }
func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }
