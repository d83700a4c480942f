package local

import (
	"context"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// sigxcpuExit is the exit code of a command ended by SIGXCPU (128+24).
const sigxcpuExit = limits.SIGXCPUExit

// LimitsEnforced says which limits hold for every command of this
// sandbox, and how: "cgroup" for all the command's processes together,
// "userns" for the whole sandbox (RLIMIT_NPROC counted per user
// namespace), "rlimit-per-process" where each process gets the limit
// anew, "none" where there is no limit. Every CommandResult carries it.
func (s *Sandbox) LimitsEnforced() driver.LimitsEnforced { return s.iso.LimitsEnforced() }

// finish completes a foreground result: why the command died, and which
// limits held.
func (s *Sandbox) finish(res *driver.CommandResult, w *wrapped) {
	if res == nil {
		return
	}
	if w.Report != nil {
		w.Report(res)
	}
	le := s.iso.LimitsEnforced()
	res.LimitsEnforced = &le
}

// bgLimit is how a background task's CPU budget ended.
type bgLimit struct {
	done     chan struct{} // closed once exceeded is set
	exceeded bool
}

// watchBackground releases the task's per-command resources when it
// ends, noting first whether its CPU budget killed it.
func (s *Sandbox) watchBackground(id string, w *wrapped) {
	l := &bgLimit{done: make(chan struct{})}
	s.bgCPU.Store(id, l)
	go func() {
		s.Background.Wait(id)
		if w.Report != nil {
			if st, err := s.Background.BackgroundStatus(context.Background(), id); err == nil {
				res := &driver.CommandResult{ExitCode: st.ExitCode, Signal: st.Signal}
				w.Report(res)
				l.exceeded = res.CPUTimeExceeded
			}
		}
		close(l.done)
		w.Done()
	}()
}

// BackgroundStatus reports whether the task runs, and how it ended,
// including whether it was killed for using up its CPU time.
func (s *Sandbox) BackgroundStatus(ctx context.Context, taskID string) (driver.BackgroundState, error) {
	st, err := s.Background.BackgroundStatus(ctx, taskID)
	if err != nil || st.Alive {
		return st, err
	}
	if v, ok := s.bgCPU.Load(taskID); ok {
		l := v.(*bgLimit)
		select {
		case <-l.done:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		if l.exceeded {
			st.CPUTimeExceeded, st.ExitCode, st.Signal = true, sigxcpuExit, "SIGXCPU"
		}
	}
	return st, nil
}

// Isolation reports the technique that isolates the commands and their
// network mode (driver.IsolationReporter).
func (s *Sandbox) Isolation() (string, driver.NetworkMode) { return s.iso.Kind(), s.network }
