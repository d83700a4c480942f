package aiodriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// statusOffset asks /v1/bash/output for the status without output: an
// offset past any log (2^53-1 stays exact in every JSON reader).
const statusOffset = 1<<53 - 1

// bgTask is an async bash command in its own session; the session id is
// the task id.
type bgTask struct {
	session   string
	commandID string
	ended     atomic.Bool // the server reported it ended
}

// StartBackground runs command asynchronously (POST /v1/bash/exec with
// async_mode) in a new session, stderr merged into stdout so the task has
// one log, stdin /dev/null (sandboxd gives async commands a stdin pipe).
// opts.Timeout, Stdin and the callbacks do not apply. The task's PID is
// not known (0).
func (h *Handle) StartBackground(ctx context.Context, command string, opts driver.ExecOptions) (*driver.BackgroundTask, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	opts.Stdin, opts.Timeout = nil, 0
	p, err := h.plan(ctx, command, opts)
	if err != nil {
		return nil, err
	}
	info, err := h.c.BashCreateSession(ctx, aioapi.BashSessionCreateRequest{SessionID: driver.NewID("sage-bg"), ExecDir: p.dir})
	if err != nil {
		return nil, err
	}
	r, err := h.c.BashExec(ctx, aioapi.BashExecRequest{SessionID: info.SessionID, Command: "exec </dev/null 2>&1\n" + command,
		ExecDir: p.dir, Env: p.env, AsyncMode: true})
	if err != nil {
		_ = h.c.BashCloseSession(context.WithoutCancel(ctx), info.SessionID)
		return nil, err
	}
	h.mu.Lock()
	h.pruneTasksLocked()
	h.tasks[info.SessionID] = &bgTask{session: info.SessionID, commandID: r.CommandID}
	h.mu.Unlock()
	return &driver.BackgroundTask{ID: info.SessionID}, nil
}

func (h *Handle) task(id string) (*bgTask, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", driver.ErrUnknownTask, id)
	}
	return t, nil
}

// ReadBackgroundOutput reads the task's log from a byte offset (POST
// /v1/bash/output). The text is cut to max bytes at a character
// boundary. Binary output does not survive JSON strings intact.
func (h *Handle) ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (driver.BackgroundOutput, error) {
	if offset < 0 {
		return driver.BackgroundOutput{}, fmt.Errorf("aio: read background output: negative offset %d", offset)
	}
	if max <= 0 {
		max = 64 << 10
	}
	t, err := h.task(taskID)
	if err != nil {
		return driver.BackgroundOutput{}, err
	}
	o, err := h.c.BashOutput(ctx, aioapi.BashOutputRequest{SessionID: t.session, CommandID: t.commandID, Offset: offset})
	if err != nil {
		return driver.BackgroundOutput{}, err
	}
	text := cutRunes(o.Stdout, max)
	return driver.BackgroundOutput{Text: text, NextOffset: offset + int64(len(text))}, nil
}

// cutRunes cuts s to at most n bytes without splitting a character,
// unless the first character alone is longer than n.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut == 0 {
		cut = n
	}
	return s[:cut]
}

// BackgroundStatus reports the task's state.
func (h *Handle) BackgroundStatus(ctx context.Context, taskID string) (driver.BackgroundState, error) {
	t, err := h.task(taskID)
	if err != nil {
		return driver.BackgroundState{}, err
	}
	return h.status(ctx, t)
}

func (h *Handle) status(ctx context.Context, t *bgTask) (driver.BackgroundState, error) {
	o, err := h.c.BashOutput(ctx, aioapi.BashOutputRequest{SessionID: t.session, CommandID: t.commandID,
		Offset: statusOffset, StderrOffset: statusOffset})
	if err != nil {
		return driver.BackgroundState{}, err
	}
	if o.Command == nil {
		return driver.BackgroundState{}, fmt.Errorf("aio: task %s: the server reports no command", t.session)
	}
	if o.Command.Status == aioapi.StatusRunning || o.Command.Status == aioapi.StatusPending {
		return driver.BackgroundState{Alive: true}, nil
	}
	t.ended.Store(true)
	code, sig := exitStatus(o.Command.Status, o.Command.ExitCode)
	return driver.BackgroundState{ExitCode: code, Signal: sig}, nil
}

// KillBackground sends SIGTERM and, if the task still runs after
// driver.DefaultKillGrace, SIGKILL (SIGKILL at once with force); it
// returns when the task has ended. Killing a finished task is fine.
func (h *Handle) KillBackground(ctx context.Context, taskID string, force bool) error {
	t, err := h.task(taskID)
	if err != nil {
		return err
	}
	if !force {
		if err := h.c.BashKill(ctx, aioapi.BashKillRequest{SessionID: t.session, Signal: "SIGTERM"}); err != nil {
			return err
		}
		if h.waitEnded(ctx, t, driver.DefaultKillGrace) {
			return nil
		}
	}
	if err := h.c.BashKill(ctx, aioapi.BashKillRequest{SessionID: t.session, Signal: "SIGKILL"}); err != nil {
		return err
	}
	if !h.waitEnded(ctx, t, 10*time.Second) {
		return fmt.Errorf("aio: kill %s: still running after SIGKILL", taskID)
	}
	return nil
}

// waitEnded polls the task's status until it ends or limit passes.
func (h *Handle) waitEnded(ctx context.Context, t *bgTask, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		st, err := h.status(ctx, t)
		if err == nil && !st.Alive {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closeTasks kills every task (SIGKILL) and closes its session.
func (h *Handle) closeTasks(ctx context.Context) error {
	h.mu.Lock()
	tasks := h.tasks
	h.tasks = map[string]*bgTask{}
	h.mu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Go(func() {
			_ = h.c.BashKill(ctx, aioapi.BashKillRequest{SessionID: t.session, Signal: "SIGKILL"})
			if err := h.c.BashCloseSession(ctx, t.session); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
