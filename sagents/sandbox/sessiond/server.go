package sessiond

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Server serves one session's sandbox on the unix socket of its daemon
// directory. Set the fields, then call Serve once.
type Server struct {
	Name    string           // the session
	Dir     string           // its daemon directory (Dir)
	Sandbox *sandbox.Sandbox // closed by the server when it ends
	// Settings is the Fingerprint of the sandbox's config: a request made
	// for other settings is refused.
	Settings string
	// Config, when set, is the sandbox's config, described (without
	// secrets) in Info so a refused client can say which settings differ.
	Config *driver.Config
	// IdleTimeout ends the server after this long without a request;
	// 0 means never.
	IdleTimeout time.Duration
	// Logf, when set, receives one line per notable event.
	Logf func(format string, a ...any)
	// Ready, when set, is told "ok" and closed once the server listens
	// (see ReadyFile).
	Ready io.WriteCloser
	// Observer, when set, receives one chain run per request ("sage
	// exec", "sage python", "sage fs read", ...) holding the sandbox's
	// events of that request: give the Sandbox the same Manager
	// (driver.Config.Observer), whose commands that restarted the
	// session add a "session_restart" sandbox event.
	Observer *observability.Manager

	key      string            // the daemon's key (key.go)
	root     *os.Root          // the daemon directory as Serve found it
	ids      map[string]fileID // the directory, its socket and key as Serve made them
	unlinked atomic.Bool       // Shutdown unlinked the socket
	mu       sync.Mutex
	busy     int
	last     time.Time
	started  time.Time
	ending   bool
	ctx      context.Context // cancelled when the server ends: in-flight commands stop
	cancel   context.CancelFunc
	ln       *net.UnixListener
	handlers sync.WaitGroup
	waiters  []*net.UnixConn
	end      chan struct{} // closed when the server begins to end
	endOnce  sync.Once
}

// DefaultIdleTimeout is how long a daemon started by the CLI waits for a
// request before it ends.
const DefaultIdleTimeout = 15 * time.Minute

// Serving returns the pid of the live daemon serving the session of dir,
// if any.
func Serving(dir string) (pid int, ok bool) {
	rec, found, _ := readRecord(dir)
	if found && rec.PID != os.Getpid() && rec.alive() {
		return rec.PID, true
	}
	return 0, false
}

// admit decides which peer uids are served: the server's own and root.
func admit(uid int) bool { return uid == os.Geteuid() || uid == 0 || admitAnyone.Load() }

// Switches of the checks, for the tests' controls only: admitAnyone the
// peer's uid, trustNamespaces its namespaces, trustKeyless the key,
// ignoreDir the watch of the daemon directory.
var admitAnyone, trustNamespaces, trustKeyless, ignoreDir atomic.Bool

// dirCheckInterval is how often a daemon checks that its directory is
// still the one it serves in.
const dirCheckInterval = time.Second

// fileID identifies a file: a directory removed, or replaced by another
// at the same path, is not the one a daemon made.
type fileID struct{ dev, ino uint64 }

func idOf(p string) (fileID, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// Serve listens on the socket and serves until Shutdown, the idle
// timeout or ctx ends; then it closes the sandbox, removes the socket,
// the info file and the lock, and returns. A session already served by a
// live daemon is refused.
func (s *Server) Serve(ctx context.Context) error {
	if err := prepareDir(s.Dir); err != nil {
		return err
	}
	if pid, ok := Serving(s.Dir); ok {
		return fmt.Errorf("session %s is already served by pid %d", s.Name, pid)
	}
	removeLeftovers(s.Dir)
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return err
	}
	s.root = root
	if s.key, err = newKey(s.Dir); err != nil {
		root.Close()
		return err
	}
	sock := filepath.Join(s.Dir, sockName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		s.removeOwn()
		root.Close()
		return err
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		s.removeOwn()
		root.Close()
		return err
	}
	s.ids = map[string]fileID{}
	for _, p := range []string{s.Dir, sock, filepath.Join(s.Dir, keyName)} {
		s.ids[p], _ = idOf(p)
	}
	s.ln, s.started, s.last = ln, time.Now(), time.Now()
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.end = make(chan struct{})
	start, _ := procStart(os.Getpid())
	if err := writeRecord(s.Dir, record{PID: os.Getpid(), Start: start, Started: s.started, Settings: s.Settings}); err != nil {
		ln.Close()
		s.removeOwn()
		root.Close()
		return err
	}
	s.logf("session %s: serving on %s (pid %d, idle timeout %v)", s.Name, sock, os.Getpid(), s.IdleTimeout)
	if s.Ready != nil {
		io.WriteString(s.Ready, "ok")
		s.Ready.Close()
	}
	s.armIdle()
	go func() {
		select {
		case <-ctx.Done():
			s.Shutdown()
		case <-s.end:
		}
	}()
	go s.watchDir()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			break
		}
		s.mu.Lock()
		if s.ending {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.handlers.Done()
			s.handle(c)
		}()
	}
	s.finish()
	return nil
}

// Shutdown begins to end the server: no new connection, in-flight
// commands cancelled. Serve returns once all is cleaned up.
func (s *Server) Shutdown() {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.ending = true
		s.mu.Unlock()
		close(s.end)
		// Closing unlinks the socket by its path (new clients start a new
		// daemon), unless the directory is no longer this daemon's: the
		// socket there is another's.
		ours := s.dirIsOurs()
		s.ln.SetUnlinkOnClose(ours)
		s.ln.Close()
		s.unlinked.Store(ours)
		s.cancel()
	})
}

// watchDir stops the server once its directory is removed or replaced
// (rm -rf of SAGE_HOME, a new one at its path): a daemon that clients
// cannot find any more must not keep its sandbox running until its idle
// timeout. The sandbox's Close ends its processes, cgroups and mounts.
func (s *Server) watchDir() {
	t := time.NewTicker(dirCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.end:
			return
		case <-t.C:
		}
		if !ignoreDir.Load() && !s.dirIsOurs() {
			s.logf("session %s: %s was removed or replaced; stopping", s.Name, s.Dir)
			s.Shutdown()
			return
		}
	}
}

// dirIsOurs reports whether the daemon directory and its key (and its
// socket, unless Shutdown unlinked it) are still the files Serve made.
func (s *Server) dirIsOurs() bool {
	for p, want := range s.ids {
		if p == filepath.Join(s.Dir, sockName) && s.unlinked.Load() {
			continue
		}
		if id, ok := idOf(p); !ok || id != want {
			return false
		}
	}
	return true
}

// removeOwn removes the files this daemon made in its directory, through
// the directory it opened: never another daemon's of the same name.
func (s *Server) removeOwn() {
	for _, n := range leftovers {
		s.root.Remove(n)
	}
}

// finish closes the sandbox and removes the info, key and lock files,
// then releases the clients waiting on Stop.
func (s *Server) finish() {
	waitTimeout(&s.handlers, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cctx := s.Observer.ChainStart(ctx, observability.ChainInfo{SessionID: s.Name, Name: "sage session stop"})
	err := s.Sandbox.Close(cctx)
	if err != nil {
		s.Observer.ChainError(cctx, err)
		s.logf("session %s: close the sandbox: %v", s.Name, err)
	} else {
		s.Observer.ChainEnd(cctx, observability.ChainResult{})
	}
	if s.dirIsOurs() {
		l, err := lock(ctx, s.Dir)
		s.removeOwn()
		if err == nil {
			unlock(l, true)
		} else {
			s.logf("session %s: %v", s.Name, err)
		}
	} else { // removed or replaced: what is left of it, not what is at its path now
		s.removeOwn()
		s.root.Remove(lockName)
	}
	s.root.Close()
	s.logf("session %s: stopped", s.Name)
	s.mu.Lock()
	waiters := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, c := range waiters {
		c.Close()
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// armIdle checks for idleness after the timeout, and again after what
// is left of it.
func (s *Server) armIdle() {
	s.mu.Lock()
	d := s.IdleTimeout
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	var check func()
	check = func() {
		s.mu.Lock()
		d := s.IdleTimeout
		left := d - time.Since(s.last)
		idle := d > 0 && s.busy == 0 && left <= 0
		ending := s.ending
		s.mu.Unlock()
		switch {
		case ending || d <= 0:
		case idle:
			s.logf("session %s: idle for %v, stopping", s.Name, d)
			s.Shutdown()
		default:
			if left <= 0 {
				left = d // busy: the end of the request re-checks after d
			}
			time.AfterFunc(left, check)
		}
	}
	time.AfterFunc(d, check)
}

// setIdle replaces the idle timeout.
func (s *Server) setIdle(d time.Duration) {
	s.mu.Lock()
	was := s.IdleTimeout
	s.IdleTimeout = d
	s.mu.Unlock()
	if was <= 0 && d > 0 {
		s.armIdle()
	}
}

// enter and leave bracket a request that counts as use of the session.
func (s *Server) enter() {
	s.mu.Lock()
	s.busy++
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *Server) leave() {
	s.mu.Lock()
	s.busy--
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *Server) info() *Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := &Info{Name: s.Name, PID: os.Getpid(), Started: s.started, LastUsed: s.last, Busy: s.busy,
		Workspace: s.Sandbox.HostWorkspacePath(), IdleTimeout: s.IdleTimeout, Settings: s.Settings,
		MemoryBytes: treePSS(os.Getpid())}
	if s.Config != nil {
		info.Config, _ = settingsJSON(*s.Config)
	}
	return info
}

func (s *Server) logf(format string, a ...any) {
	if s.Logf != nil {
		s.Logf(format, a...)
	}
}

// requestTimeout bounds the wait for a connection's request: a client
// that connects and says nothing is dropped, so it cannot hold a handler
// (and the server's shutdown, which waits for its handlers) forever.
var requestTimeout = 10 * time.Second

// handle serves one connection: one request.
func (s *Server) handle(c *net.UnixConn) {
	refuse := func(why error) {
		s.logf("session %s: refused a connection: %v", s.Name, why)
		// Read the request first, so that the answer is not lost to a
		// reset of the connection.
		c.SetReadDeadline(time.Now().Add(time.Second))
		readFrame(c)
		writeJSON(c, kindResponse, errorResponse(fmt.Errorf("%w: %v", ErrRefused, why)))
		c.Close()
	}
	uid, err := peerUID(c)
	if err != nil || !admit(uid) {
		why := fmt.Sprintf("the peer runs as uid %d", uid)
		if err != nil {
			why = err.Error()
		}
		refuse(fmt.Errorf("this session serves uid %d only (%s)", os.Geteuid(), why))
		return
	}
	if err := peerNamespaces(c); err != nil && !trustNamespaces.Load() {
		refuse(fmt.Errorf("%v; fix: run sage where the session's daemon runs (sage session stop %s, then start it from there)", err, s.Name))
		return
	}
	var req Request
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	if err := readJSON(c, kindRequest, &req); err != nil {
		if !errors.Is(err, errFrame) && !errors.Is(err, ErrProtocol) {
			c.Close()
			return
		}
		writeJSON(c, kindResponse, errorResponse(fmt.Errorf("%w: %v", ErrProtocol, err)))
		c.Close()
		return
	}

	c.SetReadDeadline(time.Time{}) // a command's stdin may take its time
	resp := s.serve(c, req)
	if req.Op == OpStop && resp.Error == "" {
		// The client learns that everything is gone when this connection
		// closes, after the clean-up.
		writeJSON(c, kindResponse, resp)
		s.mu.Lock()
		s.waiters = append(s.waiters, c)
		s.mu.Unlock()
		s.Shutdown()
		return
	}
	writeJSON(c, kindResponse, resp)
	c.Close()
}

func (s *Server) serve(c *net.UnixConn, req Request) Response {
	if req.V != protocolVersion && !(req.V >= stableVersion && req.V < protocolVersion && (req.Op == OpInfo || req.Op == OpStop)) {
		return errorResponse(fmt.Errorf("%w: this session's daemon speaks version %d, the client %d; fix: sage session stop %s", ErrProtocol, protocolVersion, req.V, s.Name))
	}
	if !keyMatches(s.key, req.Key) && !trustKeyless.Load() {
		s.logf("session %s: refused a request without the session's key", s.Name)
		return errorResponse(fmt.Errorf("%w: the request lacks this session's key (%s, readable by its owner only, out of every sandbox's sight); fix: use a sage of this version", ErrRefused, filepath.Join(s.Dir, keyName)))
	}
	if req.IdleTimeout != nil && *req.IdleTimeout >= 0 {
		s.setIdle(*req.IdleTimeout)
	}
	switch req.Op {
	case OpInfo:
		return Response{Info: s.info()}
	case OpStop:
		return Response{}
	case OpExec, OpBackground, OpPython, OpFS, OpTask, OpCheckpoint:
	default:
		return errorResponse(fmt.Errorf("%w: unknown op %q", ErrProtocol, req.Op))
	}
	if req.Settings != "" && req.Settings != s.Settings && req.Op != OpTask && req.Op != OpCheckpoint {
		return errorResponse(fmt.Errorf("%w: session %s was started with other flags or SAGE_* settings; fix: sage session stop %s, or the same settings", ErrSettings, s.Name, s.Name))
	}
	s.enter()
	defer s.leave()
	ctx, end := s.traced(req)
	resp := s.dispatch(ctx, c, req)
	end(resp)
	return resp
}

func (s *Server) dispatch(ctx context.Context, c *net.UnixConn, req Request) Response {
	switch req.Op {
	case OpBackground:
		task, err := s.Sandbox.StartBackground(ctx, req.Command, driver.ExecOptions{Env: req.Env, Workdir: req.Workdir})
		if err != nil {
			return s.failed(err)
		}
		return Response{Task: task}
	case OpPython:
		return s.python(ctx, c, req)
	case OpFS:
		return s.fileOp(ctx, c, req)
	case OpTask:
		return s.task(ctx, req)
	case OpCheckpoint:
		return s.checkpoint(ctx, req)
	}
	return s.exec(ctx, c, req, func(ctx context.Context, opts driver.ExecOptions) (*driver.CommandResult, error) {
		return s.Sandbox.ExecuteCommand(ctx, req.Command, opts)
	})
}

// failed is the response to err, which says the session stopped when it did.
func (s *Server) failed(err error) Response {
	if s.ctx.Err() != nil {
		err = fmt.Errorf("%w: %v", ErrStopped, err)
	}
	return errorResponse(err)
}
