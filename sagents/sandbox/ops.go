package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// command runs one command between begin and end.
func (s *Sandbox) command(ctx context.Context, name string, f func(context.Context) (*CommandResult, error)) (*CommandResult, error) {
	ctx, err := s.begin(ctx, name, "", "")
	if err != nil {
		return nil, err
	}
	res, err := f(ctx)
	s.end(ctx, res, err)
	return res, err
}

// ExecuteCommand runs command with /bin/sh -c in the sandbox. A non-nil
// error means the sandbox could not run it; a command that ran and failed
// is a result with Success false.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, opts ExecOptions) (*CommandResult, error) {
	if err := driver.CheckArgs(command, opts.Env); err != nil {
		return nil, err
	}
	return s.command(ctx, "exec", func(ctx context.Context) (*CommandResult, error) {
		return s.drv.Exec(ctx, driver.ExecSpec{Command: command, ExecOptions: s.execOptions(opts)})
	})
}

// ExecutePython runs Python code in the sandbox.
func (s *Sandbox) ExecutePython(ctx context.Context, code string, opts PythonOptions) (*CommandResult, error) {
	p, ok := s.drv.(driver.PythonRunner)
	if !ok {
		return nil, s.unsupported("Python")
	}
	if err := driver.CheckArgs("", opts.Env); err != nil {
		return nil, err
	}
	opts.ExecOptions = s.execOptions(opts.ExecOptions)
	return s.command(ctx, "python", func(ctx context.Context) (*CommandResult, error) { return p.ExecutePython(ctx, code, opts) })
}

// ExecuteJavaScript runs JavaScript code in the sandbox.
func (s *Sandbox) ExecuteJavaScript(ctx context.Context, code string, opts ExecOptions) (*CommandResult, error) {
	j, ok := s.drv.(driver.JavaScriptRunner)
	if !ok {
		return nil, s.unsupported("JavaScript")
	}
	return s.command(ctx, "javascript", func(ctx context.Context) (*CommandResult, error) {
		return j.ExecuteJavaScript(ctx, code, s.execOptions(opts))
	})
}

// Restart restarts the sandbox's session, keeping its workspace.
func (s *Sandbox) Restart(ctx context.Context) error {
	r, ok := s.drv.(driver.Restarter)
	if !ok {
		return s.unsupported("session restart")
	}
	ctx, err := s.begin(ctx, "restart", "", "")
	if err != nil {
		return err
	}
	err = r.Restart(ctx)
	s.end(ctx, nil, err)
	return err
}

// fileOp runs one file operation between begin and end.
func fileOp[T any](s *Sandbox, ctx context.Context, name, path string, f func(context.Context) (T, error)) (T, error) {
	ctx, err := s.begin(ctx, name, path, "")
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(ctx)
	s.end(ctx, nil, err)
	return v, err
}

// ReadFile reads a whole regular file.
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return fileOp(s, ctx, "read_file", path, func(ctx context.Context) ([]byte, error) { return s.drv.ReadFile(ctx, path) })
}

// OpenFile opens a regular file for streaming reads and returns what the
// driver knows of it; the caller closes the reader.
func (s *Sandbox) OpenFile(ctx context.Context, path string) (io.ReadCloser, fs.FileInfo, error) {
	var fi fs.FileInfo
	rc, err := fileOp(s, ctx, "open_file", path, func(ctx context.Context) (rc io.ReadCloser, err error) {
		rc, fi, err = s.drv.Open(ctx, path)
		return rc, err
	})
	return rc, fi, err
}

// WriteFile writes data to path: replaced atomically, or appended with
// opts.Append.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error {
	_, err := fileOp(s, ctx, "write_file", path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.drv.WriteFile(ctx, path, data, opts)
	})
	return err
}

// Stat describes path, without following a final symlink.
func (s *Sandbox) Stat(ctx context.Context, path string) (FileInfo, error) {
	return fileOp(s, ctx, "stat", path, func(ctx context.Context) (FileInfo, error) { return s.drv.Stat(ctx, path) })
}

// FileExists reports whether path exists. A path that escapes is an
// error, not false.
func (s *Sandbox) FileExists(ctx context.Context, path string) (bool, error) {
	_, err := s.Stat(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// ListDirectory lists a directory, sorted by name, up to
// DefaultMaxEntries entries (ListDirectoryLimit says when there are more).
func (s *Sandbox) ListDirectory(ctx context.Context, path string) ([]FileInfo, error) {
	list, _, err := s.ListDirectoryLimit(ctx, path, DefaultMaxEntries)
	return list, err
}

// ListDirectoryLimit lists at most max entries of path (max <= 0 means
// DefaultMaxEntries), reading no more than that; truncated says there
// were more.
func (s *Sandbox) ListDirectoryLimit(ctx context.Context, path string, max int) (list []FileInfo, truncated bool, err error) {
	if max <= 0 {
		max = DefaultMaxEntries
	}
	list, err = fileOp(s, ctx, "list_dir", path, func(ctx context.Context) (l []FileInfo, err error) {
		l, truncated, err = s.drv.ReadDir(ctx, path, max)
		return l, err
	})
	return list, truncated, err
}

// EnsureDirectory creates path and its parents.
func (s *Sandbox) EnsureDirectory(ctx context.Context, path string) error {
	_, err := fileOp(s, ctx, "ensure_dir", path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.drv.MkdirAll(ctx, path)
	})
	return err
}

// DeleteFile removes a file, or a directory and everything in it.
func (s *Sandbox) DeleteFile(ctx context.Context, path string) error {
	_, err := fileOp(s, ctx, "delete", path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.drv.Remove(ctx, path)
	})
	return err
}

// FileTree walks path down to opts.MaxDepth, reading at most
// opts.MaxEntries directory entries in all.
func (s *Sandbox) FileTree(ctx context.Context, path string, opts TreeOptions) (*TreeNode, error) {
	t, ok := s.drv.(driver.TreeWalker)
	if !ok {
		return nil, s.unsupported("file tree")
	}
	return fileOp(s, ctx, "file_tree", path, func(ctx context.Context) (*TreeNode, error) { return t.FileTree(ctx, path, opts) })
}

// CopyFromHost copies a host file or directory to a sandbox path.
func (s *Sandbox) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts CopyOptions) (CopyResult, error) {
	c, ok := s.drv.(driver.HostCopier)
	if !ok {
		return CopyResult{}, s.unsupported("copy from host")
	}
	return fileOp(s, ctx, "copy_from_host", sandboxPath, func(ctx context.Context) (CopyResult, error) {
		return c.CopyFromHost(ctx, hostPath, sandboxPath, opts)
	})
}

// ToHostPath maps a sandbox path to the host path behind it.
func (s *Sandbox) ToHostPath(path string) (string, error) {
	h, ok := s.drv.(driver.HostPather)
	if !ok {
		return "", s.unsupported("host path of " + path)
	}
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	return h.ToHostPath(path)
}

// ToVirtualPath maps a host path to the sandbox path that shows it.
func (s *Sandbox) ToVirtualPath(hostPath string) (string, error) {
	h, ok := s.drv.(driver.HostPather)
	if !ok {
		return "", s.unsupported("sandbox path of " + hostPath)
	}
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	return h.ToVirtualPath(hostPath)
}
