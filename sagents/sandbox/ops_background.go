package sandbox

import (
	"context"

	"github.com/sage-go/sage/sagents/observability"
)

func (s *Sandbox) background() (BackgroundRunner, error) {
	b, ok := s.drv.(BackgroundRunner)
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
	if err := CheckArgs(command, opts.Env); err != nil {
		return nil, err
	}
	ctx, err = s.begin(ctx, "start_background", "", "")
	if err != nil {
		return nil, err
	}
	task, err := b.StartBackground(ctx, command, opts)
	if err != nil {
		s.end(ctx, nil, err)
		return nil, err
	}
	s.obs.SandboxEnd(ctx, observability.SandboxResult{TaskID: task.ID})
	return task, nil
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
	return b.BackgroundStatus(ctx, taskID)
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
