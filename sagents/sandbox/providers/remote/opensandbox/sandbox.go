package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// ErrSandboxGone means the sandbox was terminated behind the client's
// back (its TTL ran out, or someone deleted it). It matches
// fs.ErrNotExist.
var ErrSandboxGone = fmt.Errorf("opensandbox: the sandbox is gone (expired or deleted): %w", fs.ErrNotExist)

// osSandbox is one OpenSandbox sandbox opened by this process: the
// operations behind the Handle (handle.go) live in exec.go, files.go
// and background.go.
type osSandbox struct {
	cfg     config
	id      string
	owned   bool // created by this process
	life    *LifecycleClient
	execd   *ExecdClient
	ws      string // the workspace as the sandbox sees it
	realWS  string // the workspace with symlinks resolved
	timeout time.Duration

	stopRenew context.CancelFunc
	renewDone chan struct{}

	mu       sync.Mutex
	closed   bool
	tasks    map[string]int // background command ids started here: their pids
	stale    []string       // execd output files to remove
	py       *codeContext
	pyMu     sync.Mutex // one Python cell at a time
	closeMu  sync.Once
	closeErr error
}

// open finds the thread's sandbox (label sage.thread) or creates one,
// waits until its execd answers and returns it. Whatever Open created
// is deleted again when it fails.
func open(ctx context.Context, cfg config) (_ *osSandbox, err error) {
	life := NewLifecycleClient(cfg.URL, cfg.APIKey, cfg.HTTPClient)
	if cfg.ExecdTmp == "" {
		cfg.ExecdTmp = defaultExecdTmp
	}
	s := &osSandbox{cfg: cfg, life: life, tasks: map[string]int{}, timeout: cfg.Timeout}
	if s.timeout <= 0 {
		s.timeout = driver.DefaultTimeout
	}
	if cfg.Thread != "" && cfg.Locker != nil {
		release, err := cfg.Locker.Lock(ctx, cfg.Thread)
		if err != nil {
			return nil, fmt.Errorf("opensandbox: locking thread %q: %w", cfg.Thread, err)
		}
		defer release()
	}
	if cfg.Thread != "" {
		if err := s.find(ctx); err != nil {
			return nil, err
		}
	}
	if s.id == "" {
		if err := s.create(ctx); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && s.owned {
			err = errors.Join(err, life.Delete(context.WithoutCancel(ctx), s.id))
		}
	}()
	rctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if _, err := life.waitRunning(rctx, s.id, 200*time.Millisecond); err != nil {
		return nil, err
	}
	ep, err := life.endpoint(rctx, s.id, execdPort)
	if err != nil {
		return nil, err
	}
	s.execd = NewExecdClient(ep.URL, cfg.ExecdToken, ep.Headers, cfg.HTTPClient)
	if err := s.execd.waitReady(rctx, 200*time.Millisecond); err != nil {
		return nil, fmt.Errorf("opensandbox: execd of sandbox %s: %w", s.id, err)
	}
	if err := s.setWorkspace(rctx); err != nil {
		return nil, err
	}
	if cfg.TTL > 0 {
		s.startRenewer()
	}
	return s, nil
}

// find looks for the thread's sandbox and resumes it when paused.
func (s *osSandbox) find(ctx context.Context) error {
	list, err := s.life.List(ctx, map[string]string{LabelThread: s.cfg.Thread},
		statePending, stateRunning, statePausing, statePaused, stateResuming)
	if err != nil {
		return err
	}
	for _, sb := range list {
		if sb.Metadata[LabelThread] != s.cfg.Thread {
			continue
		}
		s.id = sb.ID
		if sb.Status.State == statePaused {
			return s.life.resume(ctx, sb.ID)
		}
		return nil
	}
	return nil
}

func (s *osSandbox) create(ctx context.Context) error {
	req := createRequest{Image: imageSpec{URI: s.cfg.Image}, Entrypoint: s.cfg.Entrypoint,
		ResourceLimits: s.cfg.Resources, Env: s.cfg.Env, Metadata: map[string]string{"sage.provider": "opensandbox"}}
	if s.cfg.Thread != "" {
		req.Metadata[LabelThread] = s.cfg.Thread
	}
	if s.cfg.TTL > 0 {
		sec := int(s.cfg.TTL / time.Second)
		req.Timeout = &sec
	}
	sb, err := s.life.create(ctx, req)
	if err != nil {
		return err
	}
	s.id, s.owned = sb.ID, true
	return nil
}

// setWorkspace creates the configured workspace, or with "auto" asks
// the sandbox for its working directory, and resolves its symlinks.
func (s *osSandbox) setWorkspace(ctx context.Context) error {
	if s.cfg.Workspace == "auto" {
		out, code, err := s.shell(ctx, "pwd -P", nil)
		if err != nil || code != 0 {
			return fmt.Errorf("opensandbox: asking the sandbox for its working directory: %w (exit %d)", err, code)
		}
		s.ws = strings.TrimSpace(out)
	} else {
		s.ws = s.cfg.Workspace
		if err := s.execd.makeDirs(ctx, map[string]permission{s.ws: {Mode: 755}}); err != nil {
			return err
		}
	}
	real, err := s.realpath(ctx, s.ws)
	if err != nil {
		return err
	}
	s.realWS = real
	return nil
}

// startRenewer moves the expiry forward every RenewEvery until Close.
func (s *osSandbox) startRenewer() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopRenew, s.renewDone = cancel, make(chan struct{})
	go func() {
		defer close(s.renewDone)
		every := s.cfg.RenewEvery
		if every <= 0 {
			every = s.cfg.TTL / 3
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				rctx, c := context.WithTimeout(ctx, 30*time.Second)
				_, _ = s.life.renew(rctx, s.id, time.Now().Add(s.cfg.TTL))
				c()
			}
		}
	}()
}

// ID is the sandbox id.
func (s *osSandbox) ID() string { return s.id }

// workspace is the workspace path inside the sandbox.
func (s *osSandbox) workspace() string { return s.ws }

// lifecycle is the lifecycle client.
func (s *osSandbox) lifecycle() *LifecycleClient { return s.life }

// execdClient is the execd client.
func (s *osSandbox) execdClient() *ExecdClient { return s.execd }

// check returns driver.ErrClosed after Close.
func (s *osSandbox) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return driver.ErrClosed
	}
	return nil
}

// gone turns a failure to reach execd into ErrSandboxGone when the
// lifecycle server says the sandbox is no more.
func (s *osSandbox) gone(ctx context.Context, err error) error {
	var ae *APIError
	if err == nil || ctx.Err() != nil || (errors.As(err, &ae) && ae.Status != http.StatusNotFound && ae.Status < 500) {
		return err
	}
	sb, gerr := s.life.get(context.WithoutCancel(ctx), s.id)
	if errors.Is(gerr, fs.ErrNotExist) || (gerr == nil && (sb.Status.State == stateTerminated || sb.Status.State == stateStopping || sb.Status.State == stateFailed)) {
		return fmt.Errorf("%w: sandbox %s: %w", ErrSandboxGone, s.id, err)
	}
	return err
}

// Close stops the renewer, interrupts this process's background
// commands and Python, and deletes the sandbox unless it is kept for
// its thread. Only what this process started is released.
func (s *osSandbox) Close(ctx context.Context) error {
	s.closeMu.Do(func() {
		s.mu.Lock()
		s.closed = true
		tasks := s.tasks
		py := s.py
		stale := s.stale
		s.stale = nil
		s.mu.Unlock()
		if s.stopRenew != nil {
			s.stopRenew()
			<-s.renewDone
		}
		var errs []error
		keep := s.cfg.Keep && s.cfg.Thread != ""
		if keep {
			for id := range tasks {
				stale = append(stale, path.Join(s.cfg.ExecdTmp, id+".output"))
			}
			if len(stale) > 0 {
				s.dropNow(stale)
			}
			for id := range tasks {
				if st, err := s.execd.status(ctx, id); err == nil && st.Running {
					errs = append(errs, ignoreGone(s.execd.interrupt(ctx, id)))
				}
			}
			if py != nil {
				errs = append(errs, ignoreGone(s.execd.deleteContext(ctx, py.ID)))
			}
		} else {
			errs = append(errs, ignoreGone(s.life.Delete(ctx, s.id)))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// abs makes p absolute against the workspace and checks, without
// asking the sandbox, that it stays inside.
func (s *osSandbox) abs(op, p string) (string, error) {
	if !path.IsAbs(p) {
		p = path.Join(s.ws, p)
	}
	p = path.Clean(p)
	if p != s.ws && !strings.HasPrefix(p, s.ws+"/") {
		return "", driver.NewPathError(op, p, driver.ErrEscape, "outside the workspace "+s.ws)
	}
	return p, nil
}

// target is a path resolved inside the sandbox: its real path and, when
// it exists, what execd says about it (a final symlink not followed when
// resolve was asked to keep it).
type target struct {
	real string
	info *fileInfo // nil: it does not exist
}

// resolve maps p to its real path in the sandbox and checks that it stays
// in the workspace. With leaf set, a symlink as the last component is
// kept (for writes and deletes, which act on the link itself).
//
// It asks the file API first: one GET /files/info for every component
// below the workspace says whether any is a symlink, and if none is, the
// path is its own real path. Only a path through a symlink, or with more
// than its last component missing, costs a command (realpath).
func (s *osSandbox) resolve(ctx context.Context, op, p string, leaf bool) (target, error) {
	a, err := s.abs(op, p)
	if err != nil {
		return target{}, err
	}
	cand := s.realWS + strings.TrimPrefix(a, s.ws)
	var chain []string
	for q := cand; q != s.realWS && strings.HasPrefix(q, s.realWS+"/"); q = path.Dir(q) {
		chain = append(chain, q)
	}
	if len(chain) == 0 {
		return target{real: s.realWS, info: &fileInfo{Path: s.realWS, Type: "directory"}}, nil
	}
	plain := func(infos map[string]fileInfo, paths []string, leafOK bool) bool {
		for _, q := range paths {
			fi, ok := infos[q]
			if !ok || (fi.Type == "symlink" && !(leafOK && q == cand)) {
				return false
			}
		}
		return true
	}
	infos, err := s.execd.info(ctx, chain...)
	switch {
	case err == nil && plain(infos, chain, leaf):
		fi := infos[cand]
		return target{real: cand, info: &fi}, nil
	case isNotExist(err) && len(chain) > 1:
		// Maybe only the last component is missing.
		if infos, err := s.execd.info(ctx, chain[1:]...); err == nil && plain(infos, chain[1:], false) {
			return target{real: cand}, nil
		}
	case len(chain) == 1 && isNotExist(err):
		return target{real: cand}, nil
	case err != nil && ctx.Err() != nil:
		return target{}, err
	}
	return s.resolveSlow(ctx, op, p, a, leaf)
}

// resolveSlow resolves a through the sandbox's realpath.
func (s *osSandbox) resolveSlow(ctx context.Context, op, p, a string, leaf bool) (target, error) {
	dir, name := a, ""
	if leaf && a != s.ws {
		dir, name = path.Dir(a), path.Base(a)
	}
	real, err := s.realpath(ctx, dir)
	if err != nil {
		return target{}, err
	}
	if name != "" {
		real = path.Join(real, name)
	}
	if real != s.realWS && !strings.HasPrefix(real, s.realWS+"/") {
		return target{}, driver.NewPathError(op, p, driver.ErrEscape, "resolves outside the workspace (through a symlink)")
	}
	t := target{real: real}
	infos, err := s.execd.info(ctx, real)
	switch {
	case err == nil:
		if fi, ok := infos[real]; ok {
			t.info = &fi
		}
	case !isNotExist(err):
		return target{}, s.pathErr(op, p, s.gone(ctx, err))
	}
	return t, nil
}

// realpath resolves symlinks in p inside the sandbox. The path goes
// through the environment, never into the command string.
func (s *osSandbox) realpath(ctx context.Context, p string) (string, error) {
	// The final echo ends the output with a line end of its own, so the
	// output is the same whether or not execd's output file could be
	// read (see lines.go).
	out, code, err := s.shell(ctx, `realpath -z -m -- "$SAGE_PATH" && echo`, map[string]string{"SAGE_PATH": p})
	if err != nil {
		return "", err
	}
	out, ok := strings.CutSuffix(out, "\x00\n")
	if code != 0 || !ok || !path.IsAbs(out) || strings.Contains(out, "\x00") {
		return "", fmt.Errorf("opensandbox: resolving %q in the sandbox failed (exit %d): %.200q", p, code, out)
	}
	return out, nil
}
