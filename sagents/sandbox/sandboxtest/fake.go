package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Fake is an in-memory driver.Driver for tests of code that uses a
// sandbox (tools, agents) without running anything. Files live in a map;
// Exec calls ExecFunc (nil: every command succeeds with no output) and
// records each spec in Execs. It has no optional capability, so every
// one of them answers driver.ErrUnsupported through *sandbox.Sandbox.
type Fake struct {
	// ExecFunc answers Exec; nil means success with empty output.
	ExecFunc func(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error)

	mu     sync.Mutex
	files  map[string][]byte // by clean absolute path
	dirs   map[string]bool
	execs  []driver.ExecSpec
	closed int
}

// FakeWorkspace is the Fake's workspace path.
const FakeWorkspace = "/workspace"

// NewFake returns a Fake wrapped in a *sandbox.Sandbox of mode
// "passthrough", with an empty workspace.
func NewFake() (*sandbox.Sandbox, *Fake) {
	f := &Fake{files: map[string][]byte{}, dirs: map[string]bool{FakeWorkspace: true}}
	return sandbox.NewFromDriver(driver.Config{Mode: driver.Passthrough}, f), f
}

// Execs returns the commands run so far.
func (f *Fake) Execs() []driver.ExecSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]driver.ExecSpec(nil), f.execs...)
}

// Closed counts the calls of Close.
func (f *Fake) Closed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// ID implements driver.Driver.
func (f *Fake) ID() string { return "fake" }

// WorkspacePath implements driver.Driver.
func (f *Fake) WorkspacePath() string { return FakeWorkspace }

// Close implements driver.Driver.
func (f *Fake) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

// Exec implements driver.Driver.
func (f *Fake) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, spec)
	f.mu.Unlock()
	if f.ExecFunc != nil {
		return f.ExecFunc(ctx, spec)
	}
	return &driver.CommandResult{Success: true}, nil
}

// resolve maps p into the workspace; anything outside is an escape.
func (f *Fake) resolve(op, p string) (string, error) {
	v := p
	if !path.IsAbs(v) {
		v = path.Join(FakeWorkspace, v)
	}
	v = path.Clean(v)
	if strings.IndexByte(p, 0) >= 0 || (v != FakeWorkspace && !strings.HasPrefix(v, FakeWorkspace+"/")) {
		return "", driver.NewPathError(op, p, driver.ErrEscape, "outside the fake workspace")
	}
	return v, nil
}

// ReadFile implements driver.FS.
func (f *Fake) ReadFile(_ context.Context, p string) ([]byte, error) {
	v, err := f.resolve("read", p)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[v]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return bytes.Clone(b), nil
}

// WriteFile implements driver.FS; parents are created.
func (f *Fake) WriteFile(_ context.Context, p string, data []byte, opts driver.WriteOptions) error {
	v, err := f.resolve("write", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[v] {
		return &fs.PathError{Op: "write", Path: p, Err: fs.ErrInvalid}
	}
	for d := path.Dir(v); d != FakeWorkspace && d != "/"; d = path.Dir(d) {
		f.dirs[d] = true
	}
	if opts.Append {
		data = append(bytes.Clone(f.files[v]), data...)
	}
	f.files[v] = bytes.Clone(data)
	return nil
}

// Stat implements driver.FS.
func (f *Fake) Stat(_ context.Context, p string) (driver.FileInfo, error) {
	v, err := f.resolve("stat", p)
	if err != nil {
		return driver.FileInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statLocked(p, v)
}

func (f *Fake) statLocked(p, v string) (driver.FileInfo, error) {
	if f.dirs[v] {
		return driver.FileInfo{Name: path.Base(v), Path: v, IsDir: true, Mode: "drwxr-xr-x"}, nil
	}
	if b, ok := f.files[v]; ok {
		return driver.FileInfo{Name: path.Base(v), Path: v, Size: int64(len(b)), Mode: "-rw-r--r--", ModTime: time.Time{}}, nil
	}
	return driver.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

// ReadDir implements driver.FS.
func (f *Fake) ReadDir(_ context.Context, p string, max int) ([]driver.FileInfo, bool, error) {
	v, err := f.resolve("list", p)
	if err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirs[v] {
		return nil, false, &fs.PathError{Op: "list", Path: p, Err: fs.ErrNotExist}
	}
	var out []driver.FileInfo
	add := func(name string) {
		if path.Dir(name) == v {
			fi, _ := f.statLocked(name, name)
			out = append(out, fi)
		}
	}
	for name := range f.files {
		add(name)
	}
	for name := range f.dirs {
		add(name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) > max {
		return out[:max], true, nil
	}
	return out, false, nil
}

// Remove implements driver.FS.
func (f *Fake) Remove(_ context.Context, p string) error {
	v, err := f.resolve("delete", p)
	if err != nil {
		return err
	}
	if v == FakeWorkspace {
		return driver.NewPathError("delete", p, driver.ErrBadPath, "is the workspace")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.statLocked(p, v); err != nil {
		return err
	}
	for name := range f.files {
		if name == v || strings.HasPrefix(name, v+"/") {
			delete(f.files, name)
		}
	}
	for name := range f.dirs {
		if name == v || strings.HasPrefix(name, v+"/") {
			delete(f.dirs, name)
		}
	}
	return nil
}

// MkdirAll implements driver.FS.
func (f *Fake) MkdirAll(_ context.Context, p string) error {
	v, err := f.resolve("mkdir", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := v; d != FakeWorkspace && d != "/"; d = path.Dir(d) {
		if _, ok := f.files[d]; ok {
			return &fs.PathError{Op: "mkdir", Path: p, Err: fs.ErrExist}
		}
		f.dirs[d] = true
	}
	return nil
}

// Open implements driver.FS.
func (f *Fake) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	b, err := f.ReadFile(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil, nil
}
