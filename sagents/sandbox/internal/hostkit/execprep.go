package hostkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Workdir checks opts (timeout, environment names) and resolves its
// working directory, which must be an existing directory; "" means the
// workspace. Providers call it before starting a command.
func (h *HostFS) Workdir(opts driver.ExecOptions) (Location, error) {
	if h.Check != nil {
		if err := h.Check(); err != nil {
			return Location{}, err
		}
	}
	if opts.Timeout < 0 {
		return Location{}, fmt.Errorf("sandbox: timeout %v is negative", opts.Timeout)
	}
	for k := range opts.Env {
		if !driver.ValidEnvName(k) {
			return Location{}, fmt.Errorf("sandbox: env: invalid variable name %q", k)
		}
	}
	wd := opts.Workdir
	if wd == "" {
		wd = "."
	}
	loc, err := h.Mapper.Resolve(wd)
	if err != nil {
		return Location{}, err
	}
	fi, err := os.Stat(loc.Host)
	if err != nil {
		// The error names the directory as the sandbox sees it: the host
		// path behind it is not the caller's (nor the model's) business.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: pe.Op, Path: loc.Virtual, Err: pe.Err}
		}
		return Location{}, fmt.Errorf("sandbox: workdir %q: %w", wd, err)
	}
	if !fi.IsDir() {
		return Location{}, fmt.Errorf("sandbox: workdir %q is not a directory", wd)
	}
	return loc, nil
}
