//go:build linux

package local

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// executable is os.Executable; a test points it elsewhere to place a
// sage-supervisor next to "this program".
var executable = os.Executable

// supervisorProgram is the supervisor program o asks for: prog is its
// host path, "" for this program re-executed; named is true when
// o.Supervisor names it (then a refusal fails the session rather than
// falling back to this program).
func (o SessionOptions) supervisorProgram() (prog string, named bool) {
	switch o.Supervisor {
	case SupervisorSelf:
		return "", false
	case "":
	default:
		return o.Supervisor, true
	}
	exe, err := executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", false
	}
	p := filepath.Join(filepath.Dir(exe), supervisor.Name)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 || refused(p, fi) {
		return "", false
	}
	return p, false
}

// refusedSupervisors are the sage-supervisor programs found next to the
// executable whose handshake failed, by path and file identity (a
// rebuilt one is tried again): this program serves instead.
var refusedSupervisors sync.Map // supervisorKey -> error

// verifiedSupervisors are the programs whose handshake passed, by path
// and file identity: a later session of the same program sends its first
// request without waiting for the pong (its --protocol still makes a
// supervisor of another version refuse to serve).
var verifiedSupervisors sync.Map // supervisorKey -> struct{}

type supervisorKey struct {
	path       string
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

func keyOf(path string, fi os.FileInfo) supervisorKey {
	k := supervisorKey{path: path, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = st.Dev, st.Ino
	}
	return k
}

// verified reports whether prog passed a handshake as the file it is.
func verified(prog string) bool {
	fi, err := os.Stat(prog)
	if err != nil {
		return false
	}
	_, ok := verifiedSupervisors.Load(keyOf(prog, fi))
	return ok
}

func refused(path string, fi os.FileInfo) bool {
	_, ok := refusedSupervisors.Load(keyOf(path, fi))
	return ok
}

// refuseSupervisor remembers that prog, found next to the executable,
// failed its handshake (err), and says so once.
func refuseSupervisor(prog string, err error) {
	fi, serr := os.Stat(prog)
	if serr != nil {
		return
	}
	if _, loaded := refusedSupervisors.LoadOrStore(keyOf(prog, fi), err); !loaded {
		slog.Warn("local sandbox: not using the sage-supervisor next to this program; re-executing this program as the session supervisor (slower first command)", "path", prog, "err", err)
	}
}

// handshake checks that the separate supervisor program prog serves this
// build's protocol: its pong carries supervisor.Protocol. It runs once
// per program file and process (verified).
func (l *liveSession) handshake(prog string) error {
	if err := l.pong(); err != nil {
		return fmt.Errorf("local: session supervisor %s: %w; fix: rebuild it from the same sources as this program (make build puts it next to bin/sage), remove it, or set SessionOptions.Supervisor to %q", prog, err, SupervisorSelf)
	}
	if fi, err := os.Stat(prog); err == nil {
		verifiedSupervisors.Store(keyOf(prog, fi), struct{}{})
	}
	return nil
}
