package opensandbox

import (
	"bytes"
	"context"
	"io"
	"io/fs"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Driver is the driver.Driver over a Sandbox: the Sandbox's own methods,
// under the names the driver interfaces use. Capabilities it has:
// background tasks, Python, file trees and copies from the host.
type Driver struct{ *Sandbox }

var (
	_ driver.Driver           = (*Driver)(nil)
	_ driver.BackgroundRunner = (*Driver)(nil)
	_ driver.PythonRunner     = (*Driver)(nil)
	_ driver.TreeWalker       = (*Driver)(nil)
	_ driver.HostCopier       = (*Driver)(nil)
)

// WorkspacePath is the workspace inside the sandbox.
func (d *Driver) WorkspacePath() string { return d.Workspace() }

// Exec runs spec.Command through execd.
func (d *Driver) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	return d.ExecuteCommand(ctx, spec.Command, spec.ExecOptions)
}

// Stat describes p (a final symlink is not followed).
func (d *Driver) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
	if err := d.check(); err != nil {
		return driver.FileInfo{}, err
	}
	t, err := d.resolve(ctx, "stat", p, true)
	if err != nil {
		return driver.FileInfo{}, err
	}
	if t.info == nil {
		return driver.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	f := *t.info
	return d.fileInfo(f), nil
}

// ReadDir lists at most max entries (max > 0) of a directory.
func (d *Driver) ReadDir(ctx context.Context, p string, max int) ([]driver.FileInfo, bool, error) {
	list, err := d.ListDirectory(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if max > 0 && len(list) > max {
		return list[:max], true, nil
	}
	return list, false, nil
}

// Remove removes a file, a symlink or a directory tree.
func (d *Driver) Remove(ctx context.Context, p string) error { return d.DeleteFile(ctx, p) }

// MkdirAll creates a directory and its parents.
func (d *Driver) MkdirAll(ctx context.Context, p string) error { return d.EnsureDirectory(ctx, p) }

// Open reads the file (bounded by maxFileSize) and streams it from memory.
func (d *Driver) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	b, err := d.ReadFile(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil, nil
}
