package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// lockFileName is the FileStore's lock file in a thread's directory.
const lockFileName = "sandbox.lock"

// FileStore keeps state in DIR/threads/<thread>/sandbox.json and locks
// with flock(2) on DIR/threads/<thread>/sandbox.lock: good for several
// processes on one host, or hosts sharing one file system that honours
// flock. DIR is usually SAGE_HOME.
type FileStore struct {
	dir    string
	logger *slog.Logger
	// poll is how often a blocked Lock retries (flock has no wait with a
	// deadline).
	poll time.Duration
}

var _ StateStore = (*FileStore)(nil)

// NewFileStore returns a store rooted at dir ("" means SAGE_HOME).
func NewFileStore(dir string) *FileStore {
	if dir == "" {
		dir = sagehome.Dir()
	}
	return &FileStore{dir: dir, logger: slog.Default(), poll: 5 * time.Millisecond}
}

// WithLogger sets the logger that reports unreadable state files.
func (s *FileStore) WithLogger(l *slog.Logger) *FileStore { s.logger = l; return s }

// threadPath is DIR/threads/<thread>.
func (s *FileStore) threadPath(threadID string) string {
	return filepath.Join(s.dir, "threads", threadID)
}

func (s *FileStore) threadDir(threadID string) (string, error) {
	if !driver.ValidID(threadID) {
		return "", fmt.Errorf("aio: %w", &InvalidThreadError{ThreadID: threadID})
	}
	return s.threadPath(threadID), nil
}

// Save writes sandbox.json atomically: a temporary file in the same
// directory, fsync, rename, fsync of the directory. The file is 0600: it
// holds the sandbox's API token.
func (s *FileStore) Save(_ context.Context, threadID string, info SandboxInfo) error {
	dir, err := s.threadDir(threadID)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("aio: state: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("aio: state: %w", err)
	}
	if err := writeAtomic(dir, "sandbox.json", data); err != nil {
		return fmt.Errorf("aio: state: save %s: %w", threadID, err)
	}
	return nil
}

func writeAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Load reads sandbox.json. A missing file is a miss; a corrupt or
// unreadable one is logged and treated as a miss too (the provider then
// confirms with the backend, so nothing is lost but the record).
func (s *FileStore) Load(_ context.Context, threadID string) (SandboxInfo, bool, error) {
	dir, err := s.threadDir(threadID)
	if err != nil {
		return SandboxInfo{}, false, err
	}
	p := filepath.Join(dir, "sandbox.json")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return SandboxInfo{}, false, nil
	}
	var info SandboxInfo
	if err == nil {
		err = json.Unmarshal(data, &info)
	}
	if err == nil && info.SandboxID == "" {
		err = errors.New("no sandbox_id")
	}
	if err != nil {
		s.logger.Warn("aio: ignoring unreadable sandbox state", "path", p, "err", err)
		return SandboxInfo{}, false, nil
	}
	return info, true, nil
}

// Remove deletes sandbox.json; the directory and the lock file stay.
func (s *FileStore) Remove(_ context.Context, threadID string) error {
	dir, err := s.threadDir(threadID)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, "sandbox.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("aio: state: remove %s: %w", threadID, err)
	}
	return nil
}

// Lock takes an exclusive flock on sandbox.lock, retrying until ctx ends.
// The kernel releases it when the holder dies, so a killed process never
// leaves the thread locked. A lock file removed while it waited (a purge
// removes the thread's directory under the lock) is not a lock: it locks
// the file now at the path.
func (s *FileStore) Lock(ctx context.Context, threadID string) (func(), error) {
	dir, err := s.threadDir(threadID)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFileName)
	for {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("aio: state lock: %w", err)
		}
		fl := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
		ok, err := fl.TryLockContext(ctx, s.poll)
		if err != nil {
			_ = fl.Close()
			return nil, fmt.Errorf("aio: state lock %s: %w", threadID, err)
		}
		if !ok {
			_ = fl.Close()
			return nil, fmt.Errorf("aio: state lock %s: %w", threadID, ctx.Err())
		}
		// A purge removes the lock file under its lock: whoever waited
		// on the removed file holds nothing, and takes the path's
		// current file instead.
		held, herr := fl.Stat()
		now, nerr := os.Stat(path)
		if herr == nil && nerr == nil && os.SameFile(held, now) {
			return func() { _ = fl.Close() }, nil
		}
		_ = fl.Close()
	}
}

// List returns every thread that has a readable sandbox.json.
func (s *FileStore) List(ctx context.Context) (map[string]SandboxInfo, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "threads"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]SandboxInfo{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("aio: state: %w", err)
	}
	out := map[string]SandboxInfo{}
	for _, e := range ents {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		if info, ok, _ := s.Load(ctx, e.Name()); ok {
			out[e.Name()] = info
		}
	}
	return out, nil
}
