package sessiond

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Names in a session's daemon directory.
const (
	sockName = "sock"
	infoName = "info"
	lockName = "lock"
	logName  = "log"
)

// maxInfo bounds the info file read.
const maxInfo = 64 << 10

// CheckName refuses a session name that could leave the sessions
// directory or is too long, with a one-line error naming the fix.
func CheckName(name string) error {
	if !driver.ValidID(name) {
		return fmt.Errorf("session name %q: want 1-64 characters of A-Z a-z 0-9 _ - (no '/', no '..')", name)
	}
	return nil
}

// maxSocketPath is the longest path a unix socket may have on Linux
// (sun_path holds 108 bytes with the terminating NUL; macOS: 104).
const maxSocketPath = 103

// Dir is the daemon directory of session name: home/sessions/NAME/daemon.
// A home so deep that the socket's path would not fit a unix socket
// address is refused, naming the fix (the socket would fail with a bare
// "invalid argument").
func Dir(home, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	dir := filepath.Join(home, "sessions", name, "daemon")
	if n := len(filepath.Join(dir, sockName)); n > maxSocketPath {
		return "", &driver.ConfigError{Field: "SAGE_HOME", Value: home,
			Reason: fmt.Sprintf("the socket of session %s would be %d bytes long, over the %d a unix socket's path may have; fix: a shorter SAGE_HOME or session name", name, n, maxSocketPath)}
	}
	return dir, nil
}

// prepareDir creates dir (0700) and checks it is a directory of this
// user that nobody else may enter: the socket's first line of defence.
func prepareDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkDir(dir)
}

func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return &fs.PathError{Op: "session dir", Path: dir, Err: fmt.Errorf("%w: not a directory; fix: remove it", fs.ErrPermission)}
	case ok && int(st.Uid) != os.Geteuid():
		return &fs.PathError{Op: "session dir", Path: dir, Err: fmt.Errorf("%w: owned by uid %d, not by this user", fs.ErrPermission, st.Uid)}
	case fi.Mode().Perm()&0o077 != 0:
		return &fs.PathError{Op: "session dir", Path: dir, Err: fmt.Errorf("%w: mode %v lets others in; fix: chmod 700 it", fs.ErrPermission, fi.Mode().Perm())}
	}
	return nil
}

// record is the info file: who serves the session.
type record struct {
	PID int `json:"pid"`
	// Start is the pid's start time (/proc/PID/stat), so that a reused pid
	// is not taken for the daemon.
	Start    uint64    `json:"start"`
	Started  time.Time `json:"started"`
	Settings string    `json:"settings"`
}

func writeRecord(dir string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, infoName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, infoName))
}

// readRecord reads the info file; ok is false when there is none.
func readRecord(dir string) (r record, ok bool, err error) {
	f, err := os.Open(filepath.Join(dir, infoName))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	defer f.Close()
	if err := json.NewDecoder(&limited{f, maxInfo}).Decode(&r); err != nil {
		return r, false, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return r, true, nil
}

// alive reports whether r's daemon still runs (a zombie does not).
func (r record) alive() bool {
	start, ok := procStart(r.PID)
	return ok && (r.Start == 0 || start == r.Start)
}

// limited is io.LimitReader that fails past the limit instead of
// stopping short.
type limited struct {
	f *os.File
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("longer than %d bytes", maxInfo)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// removeLeftovers removes what a dead daemon left: socket, info, key.
func removeLeftovers(dir string) {
	for _, n := range leftovers {
		os.Remove(filepath.Join(dir, n))
	}
}

// leftovers are the names a daemon leaves in its directory while it runs.
var leftovers = []string{sockName, infoName, infoName + ".tmp", keyName}
