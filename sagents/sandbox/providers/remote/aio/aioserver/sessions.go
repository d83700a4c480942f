package aioserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Bounds: sessions kept (past it the least recently used session without
// a running command is dropped), and commands remembered per session
// (the oldest finished ones are forgotten).
const (
	maxSessions           = 4096
	maxCommandsPerSession = 64
)

// session is shell/bash session state: its Shell (working directory and
// environment kept between commands) and its commands, newest last.
type session struct {
	id       string
	created  time.Time
	lastUsed time.Time
	count    int
	shell    Shell
	commands []*command
	// bashDir is where /v1/bash/exec runs a command that names no
	// exec_dir: the session's start directory, then the latest exec_dir
	// (the API's "default working directory").
	bashDir string
}

// command is a command of a session; the server runs every one itself
// (run), so that it can outlive its request's timeout and be read, waited
// for, written to and killed later.
type command struct {
	id      string
	command string
	run     *run
}

type sessions struct {
	ws       string
	h        *sandbox.Sandbox
	newShell ShellFactory
	mu       sync.Mutex
	m        map[string]*session
}

func newSessions(h *sandbox.Sandbox, f ShellFactory) *sessions {
	return &sessions{ws: h.WorkspacePath(), h: h, newShell: f, m: map[string]*session{}}
}

// checkDir refuses a directory exec would refuse: it runs `true` there.
func (ss *sessions) checkDir(ctx context.Context, dir string) error {
	if dir == "" {
		return nil
	}
	return checkWorkdir(ctx, ss.h, dir)
}

// checkWorkdir runs `true` in dir: nil when h runs commands there.
func checkWorkdir(ctx context.Context, h *sandbox.Sandbox, dir string) error {
	res, err := h.ExecuteCommand(ctx, "true", driver.ExecOptions{Workdir: dir, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	if !res.Success {
		return badArg("exec_dir " + dir + ": cannot run commands there: " + res.Stderr)
	}
	return nil
}

// create makes a session (or, for an existing id with dir, gives it a new
// shell starting in dir). dir is checked as exec would check it.
func (ss *sessions) create(ctx context.Context, id, dir string) (*session, error) {
	if err := ss.checkDir(ctx, dir); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	s, exists := ss.m[id]
	ss.mu.Unlock()
	if exists && dir == "" {
		return s, nil
	}
	start := dir
	if start == "" {
		start = ss.ws
	}
	sh, err := ss.newShell(ctx, ss.h, start)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if id == "" {
		id = driver.NewID("sess")
	}
	if s, ok := ss.m[id]; ok {
		old := s.shell
		s.shell = sh
		s.bashDir = start
		go old.Close(context.WithoutCancel(ctx))
		return s, nil
	}
	if len(ss.m) >= maxSessions && !ss.evictLocked() {
		_ = sh.Close(ctx)
		return nil, badArg("too many sessions with running commands; close some first")
	}
	now := time.Now().UTC()
	s = &session{id: id, created: now, lastUsed: now, shell: sh, bashDir: start}
	ss.m[id] = s
	return s, nil
}

// evictLocked drops the least recently used session whose commands have
// all finished.
func (ss *sessions) evictLocked() bool {
	var victim *session
	for _, s := range ss.m {
		if s.busy() {
			continue
		}
		if victim == nil || s.lastUsed.Before(victim.lastUsed) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	delete(ss.m, victim.id)
	go victim.shell.Close(context.Background())
	return true
}

func (s *session) busy() bool {
	for _, c := range s.commands {
		if !c.run.finished() {
			return true
		}
	}
	return false
}

// use returns session id, created on first use (a new id when empty).
func (ss *sessions) use(ctx context.Context, id string) (*session, error) {
	if id != "" {
		ss.mu.Lock()
		s, ok := ss.m[id]
		ss.mu.Unlock()
		if ok {
			return s, nil
		}
	}
	return ss.create(ctx, id, "")
}

// add records a command in session id.
func (ss *sessions) add(id string, c *command) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return
	}
	s.count++
	s.lastUsed = time.Now().UTC()
	s.commands = append(s.commands, c)
	if len(s.commands) > maxCommandsPerSession {
		for i, old := range s.commands {
			if old.run.finished() {
				s.commands = append(s.commands[:i], s.commands[i+1:]...)
				break
			}
		}
	}
}

// command finds a command by id, or the session's latest.
func (ss *sessions) command(sessionID, commandID string) (*command, bool, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[sessionID]
	if !ok {
		return nil, false, false
	}
	for i := len(s.commands) - 1; i >= 0; i-- {
		if commandID == "" || s.commands[i].id == commandID {
			return s.commands[i], true, true
		}
	}
	return nil, true, false
}

// list returns the sessions (a snapshot).
func (ss *sessions) list() []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*session, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	return out
}

// bashWorkdir is the directory of a /v1/bash/exec command: its own
// exec_dir, which becomes the session's default for later commands, else
// that default.
func (ss *sessions) bashWorkdir(s *session, execDir string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if execDir != "" {
		s.bashDir = execDir
		return execDir
	}
	return s.bashDir
}

// snapshot is what the session answers show of a session.
type sessionView struct {
	id, dir, bashDir  string
	created, lastUsed time.Time
	count             int
	current           *string
}

func (ss *sessions) view(s *session) sessionView {
	ss.mu.Lock()
	v := sessionView{id: s.id, created: s.created, lastUsed: s.lastUsed, count: s.count, bashDir: s.bashDir}
	sh := s.shell
	for i := len(s.commands) - 1; i >= 0; i-- {
		if c := s.commands[i]; !c.run.finished() {
			cmd := c.command
			v.current = &cmd
			break
		}
	}
	ss.mu.Unlock()
	v.dir = sh.Dir()
	return v
}

// remove deletes a session and kills its commands.
func (ss *sessions) remove(ctx context.Context, id string) (bool, error) {
	ss.mu.Lock()
	s, ok := ss.m[id]
	delete(ss.m, id)
	ss.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, ss.kill(ctx, []*session{s})
}

func (ss *sessions) closeAll(ctx context.Context) error {
	ss.mu.Lock()
	all := make([]*session, 0, len(ss.m))
	for _, s := range ss.m {
		all = append(all, s)
	}
	ss.m = map[string]*session{}
	ss.mu.Unlock()
	return ss.kill(ctx, all)
}

func (ss *sessions) kill(ctx context.Context, list []*session) error {
	var errs []error
	for _, s := range list {
		for _, c := range s.commands {
			c.run.stop()
		}
		for _, c := range s.commands {
			c.run.wait(ctx)
		}
		errs = append(errs, s.shell.Close(ctx))
	}
	return errors.Join(errs...)
}

// stopIdleShells ends the idle bash of every session whose Shell can
// (StopIdle), and waits for them.
func (ss *sessions) stopIdleShells(ctx context.Context) {
	ss.mu.Lock()
	shells := make([]Shell, 0, len(ss.m))
	for _, s := range ss.m {
		shells = append(shells, s.shell)
	}
	ss.mu.Unlock()
	for _, sh := range shells {
		if st, ok := sh.(interface{ StopIdle(context.Context) }); ok {
			st.StopIdle(ctx)
		}
	}
}
