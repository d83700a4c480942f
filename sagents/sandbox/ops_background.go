package sandbox

import (
	"context"
	"time"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func (s *Sandbox) background() (driver.BackgroundRunner, error) {
	b, ok := s.drv.(driver.BackgroundRunner)
	if !ok {
		return nil, s.unsupported("background tasks")
	}
	return b, nil
}

// StartBackground starts command in the background; its stdout and
// stderr go to a log file.
func (s *Sandbox) StartBackground(ctx context.Context, command string, opts ExecOptions) (*BackgroundTask, error) {
	b, err := s.background()
	if err != nil {
		return nil, err
	}
	if err := driver.CheckArgs(command, opts.Env); err != nil {
		return nil, err
	}
	ctx, err = s.begin(ctx, "start_background", "", "")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	task, err := b.StartBackground(ctx, command, opts)
	if err != nil {
		s.end(ctx, nil, err)
		return nil, err
	}
	s.obs.SandboxEnd(ctx, observability.SandboxResult{TaskID: task.ID})
	if s.obs.Len() > 0 {
		if s.bgCount.Add(1) <= maxTracedTasks {
			s.bgStarts.Store(task.ID, start)
		} else {
			s.bgCount.Add(-1)
		}
	}
	return task, nil
}

// maxTracedTasks bounds the background tasks whose start is remembered
// for their end's event; tasks past it are not reported when they end.
const maxTracedTasks = 4096

// reportEnded reports a background task seen ended for the first time: a
// "background" operation backdated to its start, with its exit, a child of
// the run that saw it end (the tool call waiting for it, usually). The
// command's duration, exit code and signal are that operation's.
func (s *Sandbox) reportEnded(ctx context.Context, taskID string, st BackgroundState) {
	v, ok := s.bgStarts.LoadAndDelete(taskID)
	if !ok {
		return
	}
	s.bgCount.Add(-1)
	op := s.op("background", "", taskID)
	op.Start = v.(time.Time)
	s.stats.commands.Add(1)
	ctx = s.obs.SandboxStart(ctx, op)
	s.obs.SandboxEnd(ctx, observability.SandboxResult{Command: true, ExitCode: st.ExitCode, Signal: st.Signal, TaskID: taskID})
}

// ReadBackgroundOutput reads at most max bytes of the task's log from
// offset (max <= 0 means 64 KiB).
func (s *Sandbox) ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (BackgroundOutput, error) {
	b, err := s.background()
	if err != nil {
		return BackgroundOutput{}, err
	}
	if err := s.checkOpen(); err != nil {
		return BackgroundOutput{}, err
	}
	return b.ReadBackgroundOutput(ctx, taskID, offset, max)
}

// BackgroundStatus says whether the task runs and how it ended.
func (s *Sandbox) BackgroundStatus(ctx context.Context, taskID string) (BackgroundState, error) {
	b, err := s.background()
	if err != nil {
		return BackgroundState{}, err
	}
	if err := s.checkOpen(); err != nil {
		return BackgroundState{}, err
	}
	st, err := b.BackgroundStatus(ctx, taskID)
	if err == nil && !st.Alive {
		s.reportEnded(ctx, taskID, st)
	}
	return st, err
}

// KillBackground ends the task's whole process group: SIGTERM, then
// SIGKILL after a grace period, or SIGKILL at once when force is set.
func (s *Sandbox) KillBackground(ctx context.Context, taskID string, force bool) error {
	b, err := s.background()
	if err != nil {
		return err
	}
	ctx, err = s.begin(ctx, "kill_background", "", taskID)
	if err != nil {
		return err
	}
	err = b.KillBackground(ctx, taskID, force)
	s.end(ctx, nil, err)
	return err
}
