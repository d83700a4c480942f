package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

func init() {
	register(command{"task", "status, output or kill of a background task (sage exec --session S --background)", runTask},
		subcommand{"status", "say whether the task runs, and how it ended"},
		subcommand{"output", "print the task's output (stdout and stderr, in one log)"},
		subcommand{"kill", "end the task's processes: SIGTERM, then SIGKILL after a grace"})
}

// taskPoll is how often `sage task output --follow` looks for more.
const taskPoll = 200 * time.Millisecond

func runTask(ctx context.Context, env *cliEnv, args []string) int {
	op := args[0]
	synopsis := map[string]string{
		sessiond.TaskStatus: "sage task status [--session S] [--json] TASK",
		sessiond.TaskOutput: "sage task output [--session S] [--offset N] [--follow] TASK",
		sessiond.TaskKill:   "sage task kill [--session S] [--force] TASK",
	}[op]
	fs := newFlagSet("sage task "+op, synopsis)
	session := fs.String("session", "default", "the session that runs the task (sage exec --session S --background)")
	var asJSON, follow, force *bool
	var offset *int64
	switch op {
	case sessiond.TaskStatus:
		asJSON = fs.Bool("json", false, "print JSON")
	case sessiond.TaskOutput:
		offset = fs.Int64("offset", 0, "start at this byte of the log")
		follow = fs.Bool("follow", false, "go on printing until the task ends")
	case sessiond.TaskKill:
		force = fs.Bool("force", false, "SIGKILL at once")
	}
	pos, code, stop := parseFlagsInterspersed(env, fs, args[1:])
	if stop {
		return code
	}
	switch {
	case len(pos) != 1:
		return usageError(env, fs.Name(), "name one TASK (the id sage exec --background printed)")
	case offset != nil && *offset < 0:
		return usageError(env, fs.Name(), "--offset %d is negative", *offset)
	}
	if err := sessiond.CheckName(*session); err != nil {
		return usageError(env, fs.Name(), "--session: %v", err)
	}
	dir, err := sessiond.Dir(sandbox.Home(), *session)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	t := taskCall{ctx: ctx, dir: dir, session: *session, id: pos[0]}
	switch op {
	case sessiond.TaskStatus:
		st, err := t.status()
		if err != nil {
			return t.failed(env, fs.Name(), err)
		}
		if *asJSON {
			return printJSON(env, struct {
				ID string `json:"task_id"`
				sandbox.BackgroundState
			}{t.id, st})
		}
		fmt.Fprintln(env.stdout, taskState(st))
		return 0
	case sessiond.TaskOutput:
		if err := t.output(env.stdout, *offset, *follow); err != nil {
			return t.failed(env, fs.Name(), err)
		}
		return 0
	}
	if _, err := t.call(sessiond.TaskRequest{Op: sessiond.TaskKill, Force: *force}); err != nil {
		return t.failed(env, fs.Name(), err)
	}
	fmt.Fprintf(env.stdout, "killed %s\n", t.id)
	return 0
}

// taskCall is one task of one session's daemon.
type taskCall struct {
	ctx          context.Context
	dir, session string
	id           string
}

// call sends one task operation; it never starts a daemon (a task lives
// in a running one).
func (t taskCall) call(tr sessiond.TaskRequest) (sessiond.Response, error) {
	tr.ID = t.id
	return sessiond.Call(t.ctx, t.dir, sessiond.Request{Op: sessiond.OpTask, Task: &tr}, sessiond.Streams{})
}

func (t taskCall) status() (sandbox.BackgroundState, error) {
	r, err := t.call(sessiond.TaskRequest{Op: sessiond.TaskStatus})
	if err == nil && r.TaskState == nil {
		err = fmt.Errorf("session %s: the daemon answered without a status", t.session)
	}
	if err != nil {
		return sandbox.BackgroundState{}, err
	}
	return *r.TaskState, nil
}

// output copies the task's log from offset to w; with follow, until the
// task has ended and its log is read to the end.
func (t taskCall) output(w io.Writer, offset int64, follow bool) error {
	for {
		// Whether it ran before the read: output written before it ended
		// is read after.
		alive := false
		if follow {
			st, err := t.status()
			if err != nil {
				return err
			}
			alive = st.Alive
		}
		for {
			r, err := t.call(sessiond.TaskRequest{Op: sessiond.TaskOutput, Offset: offset, Max: sessiond.MaxTaskRead})
			if err == nil && r.Output == nil {
				err = fmt.Errorf("session %s: the daemon answered without output", t.session)
			}
			if err != nil {
				return err
			}
			if _, err := io.WriteString(w, r.Output.Text); err != nil {
				return err
			}
			if r.Output.NextOffset <= offset {
				break
			}
			offset = r.Output.NextOffset
		}
		if !alive {
			return nil
		}
		select {
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-time.After(taskPoll):
		}
	}
}

// failed reports err in one line: an unknown task or a session not
// running exit 1 (as `sage session stop` of one), the daemon failing 125.
func (t taskCall) failed(env *cliEnv, name string, err error) int {
	switch {
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, sessiond.ErrNotRunning):
		fmt.Fprintf(env.stderr, "%s: session %s is not running, so it has no task %s ('sage session ls' lists the live ones)\n", name, t.session, t.id)
		return exitFailed
	case errors.Is(err, sandbox.ErrUnknownTask):
		fmt.Fprintf(env.stderr, "%s: session %s has no task %s (sage exec --session %s --background printed the ids of its tasks)\n", name, t.session, t.id, t.session)
		return exitFailed
	}
	fmt.Fprintf(env.stderr, "%s: session %s: %s\n", name, t.session, oneLine(err.Error()))
	return exitSandboxError
}

// taskState says in words how a task is.
func taskState(st sandbox.BackgroundState) string {
	switch {
	case st.Alive:
		return "running"
	case st.CPUTimeExceeded:
		return "killed: it used up its CPU time limit"
	case st.Signal != "":
		return "killed by " + st.Signal
	}
	return fmt.Sprintf("exited %d", st.ExitCode)
}
