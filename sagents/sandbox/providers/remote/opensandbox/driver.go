package opensandbox

import (
	"bytes"
	"context"
	"io"
	"io/fs"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// osDriver is the driver.Driver over a Sandbox: the Sandbox's own methods,
// under the names the driver interfaces use. Capabilities it has:
// background tasks, Python, file trees and copies from the host.
type osDriver struct{ *osSandbox }

var (
	_ driver.Driver           = (*osDriver)(nil)
	_ driver.BackgroundRunner = (*osDriver)(nil)
	_ driver.PythonRunner     = (*osDriver)(nil)
	_ driver.TreeWalker       = (*osDriver)(nil)
	_ driver.HostCopier       = (*osDriver)(nil)
)

// WorkspacePath is the workspace inside the sandbox.
func (d *osDriver) WorkspacePath() string { return d.workspace() }

// Exec runs spec.Command through execd.
func (d *osDriver) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	return d.executeCommand(ctx, spec.Command, spec.ExecOptions)
}

// Stat describes p (a final symlink is not followed).
func (d *osDriver) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
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
func (d *osDriver) ReadDir(ctx context.Context, p string, max int) ([]driver.FileInfo, bool, error) {
	list, err := d.listDirectory(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if max > 0 && len(list) > max {
		return list[:max], true, nil
	}
	return list, false, nil
}

// Remove removes a file, a symlink or a directory tree.
func (d *osDriver) Remove(ctx context.Context, p string) error { return d.deleteFile(ctx, p) }

// MkdirAll creates a directory and its parents.
func (d *osDriver) MkdirAll(ctx context.Context, p string) error { return d.ensureDirectory(ctx, p) }

// Open reads the file (bounded by maxFileSize) and streams it from memory.
func (d *osDriver) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	b, err := d.ReadFile(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil, nil
}
