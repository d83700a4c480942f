package aioserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// maxSessions bounds the sessions kept; creating more is refused.
const maxSessions = 4096

// session is shell/bash session state: a working directory and the async
// commands started in it (each a background task of the Handle).
type session struct {
	id         string
	workingDir string
	created    time.Time
	lastUsed   time.Time
	count      int
	commands   []*asyncCommand
}

type asyncCommand struct {
	id      string
	command string
	taskID  string
}

type sessions struct {
	ws string
	mu sync.Mutex
	m  map[string]*session
}

func newSessions(ws string) *sessions { return &sessions{ws: ws, m: map[string]*session{}} }

// create makes a session (or returns the existing one with that id).
func (ss *sessions) create(id, dir string) (*session, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if id == "" {
		id = sandbox.NewID("sess")
	}
	if s, ok := ss.m[id]; ok {
		if dir != "" {
			s.workingDir = dir
		}
		return s, nil
	}
	if len(ss.m) >= maxSessions {
		return nil, badArg("too many sessions; close some first")
	}
	if dir == "" {
		dir = ss.ws
	}
	now := time.Now().UTC()
	s := &session{id: id, workingDir: dir, created: now, lastUsed: now}
	ss.m[id] = s
	return s, nil
}

func (ss *sessions) get(id string) (*session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	return s, ok
}

// use records a command in session id (created on first use) and returns
// its working directory, updated to dir when given.
func (ss *sessions) use(id, dir string) (string, error) {
	if id == "" {
		if dir == "" {
			dir = ss.ws
		}
		return dir, nil
	}
	s, err := ss.create(id, dir)
	if err != nil {
		return "", err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.count++
	s.lastUsed = time.Now().UTC()
	return s.workingDir, nil
}

func (ss *sessions) addAsync(id string, c *asyncCommand) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.m[id]; ok {
		s.commands = append(s.commands, c)
	}
}

// command finds an async command by id, or the session's latest.
func (ss *sessions) command(sessionID, commandID string) (*asyncCommand, bool, bool) {
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

// remove deletes a session and kills its async commands.
func (ss *sessions) remove(ctx context.Context, h *sandbox.Sandbox, id string) (bool, error) {
	ss.mu.Lock()
	s, ok := ss.m[id]
	delete(ss.m, id)
	ss.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, killAll(ctx, h, s.commands)
}

func (ss *sessions) closeAll(ctx context.Context, h *sandbox.Sandbox) error {
	ss.mu.Lock()
	var cmds []*asyncCommand
	for _, s := range ss.m {
		cmds = append(cmds, s.commands...)
	}
	ss.m = map[string]*session{}
	ss.mu.Unlock()
	return killAll(ctx, h, cmds)
}

func killAll(ctx context.Context, h *sandbox.Sandbox, cmds []*asyncCommand) error {
	var errs []error
	for _, c := range cmds {
		if err := h.KillBackground(ctx, c.taskID, true); err != nil && !errors.Is(err, sandbox.ErrUnknownTask) && !errors.Is(err, sandbox.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
