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
)

// Fake is an in-memory sandbox.Driver for tests of code that uses a
// sandbox (tools, agents) without running anything. Files live in a map;
// Exec calls ExecFunc (nil: every command succeeds with no output) and
// records each spec in Execs. It has no optional capability, so every
// one of them answers sandbox.ErrUnsupported through *sandbox.Sandbox.
type Fake struct {
	// ExecFunc answers Exec; nil means success with empty output.
	ExecFunc func(ctx context.Context, spec sandbox.ExecSpec) (*sandbox.CommandResult, error)

	mu     sync.Mutex
	files  map[string][]byte // by clean absolute path
	dirs   map[string]bool
	execs  []sandbox.ExecSpec
	closed int
}

// FakeWorkspace is the Fake's workspace path.
const FakeWorkspace = "/workspace"

// NewFake returns a Fake wrapped in a *sandbox.Sandbox of mode
// "passthrough", with an empty workspace.
func NewFake() (*sandbox.Sandbox, *Fake) {
	f := &Fake{files: map[string][]byte{}, dirs: map[string]bool{FakeWorkspace: true}}
	return sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Passthrough}, f), f
}

// Execs returns the commands run so far.
func (f *Fake) Execs() []sandbox.ExecSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sandbox.ExecSpec(nil), f.execs...)
}

// Closed counts the calls of Close.
func (f *Fake) Closed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// ID implements sandbox.Driver.
func (f *Fake) ID() string { return "fake" }

// WorkspacePath implements sandbox.Driver.
func (f *Fake) WorkspacePath() string { return FakeWorkspace }

// Close implements sandbox.Driver.
func (f *Fake) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

// Exec implements sandbox.Driver.
func (f *Fake) Exec(ctx context.Context, spec sandbox.ExecSpec) (*sandbox.CommandResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, spec)
	f.mu.Unlock()
	if f.ExecFunc != nil {
		return f.ExecFunc(ctx, spec)
	}
	return &sandbox.CommandResult{Success: true}, nil
}

// resolve maps p into the workspace; anything outside is an escape.
func (f *Fake) resolve(op, p string) (string, error) {
	v := p
	if !path.IsAbs(v) {
		v = path.Join(FakeWorkspace, v)
	}
	v = path.Clean(v)
	if strings.IndexByte(p, 0) >= 0 || (v != FakeWorkspace && !strings.HasPrefix(v, FakeWorkspace+"/")) {
		return "", sandbox.NewPathError(op, p, sandbox.ErrEscape, "outside the fake workspace")
	}
	return v, nil
}

// ReadFile implements sandbox.FS.
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

// WriteFile implements sandbox.FS; parents are created.
func (f *Fake) WriteFile(_ context.Context, p string, data []byte, opts sandbox.WriteOptions) error {
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

// Stat implements sandbox.FS.
func (f *Fake) Stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	v, err := f.resolve("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statLocked(p, v)
}

func (f *Fake) statLocked(p, v string) (sandbox.FileInfo, error) {
	if f.dirs[v] {
		return sandbox.FileInfo{Name: path.Base(v), Path: v, IsDir: true, Mode: "drwxr-xr-x"}, nil
	}
	if b, ok := f.files[v]; ok {
		return sandbox.FileInfo{Name: path.Base(v), Path: v, Size: int64(len(b)), Mode: "-rw-r--r--", ModTime: time.Time{}}, nil
	}
	return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

// ReadDir implements sandbox.FS.
func (f *Fake) ReadDir(_ context.Context, p string, max int) ([]sandbox.FileInfo, bool, error) {
	v, err := f.resolve("list", p)
	if err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirs[v] {
		return nil, false, &fs.PathError{Op: "list", Path: p, Err: fs.ErrNotExist}
	}
	var out []sandbox.FileInfo
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

// Remove implements sandbox.FS.
func (f *Fake) Remove(_ context.Context, p string) error {
	v, err := f.resolve("delete", p)
	if err != nil {
		return err
	}
	if v == FakeWorkspace {
		return sandbox.NewPathError("delete", p, sandbox.ErrBadPath, "is the workspace")
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

// MkdirAll implements sandbox.FS.
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

// Open implements sandbox.FS.
func (f *Fake) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	b, err := f.ReadFile(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil, nil
}
