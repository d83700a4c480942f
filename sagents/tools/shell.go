package tools

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Shell defaults.
const (
	defaultBlockUntil = 30 * time.Second
	maxBlockUntil     = 10 * time.Minute
	// maxCollect bounds how much of a task's log a result reads (head and
	// tail); the Manager then bounds what the model sees.
	maxCollect  = 8 << 20
	tailBytes   = 2 << 10
	pollEvery   = 25 * time.Millisecond
	maxPollWait = 250 * time.Millisecond
	killTimeout = 10 * time.Second
)

// ShellOptions configure the shell tools.
type ShellOptions struct {
	// Policy judges each command; nil means the built-in rules with the
	// sandbox's workspace.
	Policy *Policy
	// Approver decides commands the policy marks Ask; nil means
	// DenyApprover.
	Approver Approver
}

type shellArgs struct {
	Command      string            `json:"command" jsonschema:"minLength=1" jsonschema_description:"The command line, run with /bin/sh -c."`
	Workdir      string            `json:"workdir,omitempty" jsonschema_description:"Working directory (sandbox path; relative to the workspace). Default: the workspace."`
	BlockUntilMS *int              `json:"block_until_ms,omitempty" jsonschema:"minimum=0,maximum=600000" jsonschema_description:"How long to wait for the command to finish, in milliseconds (default 30000). If it is still running then, you get its task_id and output so far; use await_shell or kill_shell."`
	Env          map[string]string `json:"env,omitempty" jsonschema_description:"Extra environment variables."`
}

type awaitArgs struct {
	TaskID       string `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task_id from execute_shell_command."`
	BlockUntilMS *int   `json:"block_until_ms,omitempty" jsonschema:"minimum=0,maximum=600000" jsonschema_description:"How long to wait, in milliseconds (default 30000)."`
	Pattern      string `json:"pattern,omitempty" jsonschema_description:"A regular expression (Go RE2 syntax); stop waiting as soon as the output matches it."`
}

type killArgs struct {
	TaskID string `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task_id from execute_shell_command."`
}

// ShellTools returns execute_shell_command, await_shell and kill_shell.
func ShellTools(o ShellOptions) []Tool {
	if o.Approver == nil {
		o.Approver = DenyApprover{}
	}
	return []Tool{
		NewFunc("execute_shell_command",
			"Run a shell command in the sandbox workspace. Returns the exit code and output if it finishes within block_until_ms; otherwise a task_id to wait on with await_shell or stop with kill_shell. Commands are checked by a policy first.",
			o.execute),
		NewFunc("await_shell",
			"Wait for a running shell task to finish, or until its output matches pattern. Returns its status and output.",
			awaitShell),
		NewFunc("kill_shell",
			"Stop a running shell task (SIGTERM, then SIGKILL) and return its last output.",
			killShell),
	}
}

func blockUntil(ms *int) time.Duration {
	if ms == nil {
		return defaultBlockUntil
	}
	return min(time.Duration(*ms)*time.Millisecond, maxBlockUntil)
}

func (o ShellOptions) execute(ctx context.Context, h Sandbox, a shellArgs) (Result, error) {
	if err := o.check(ctx, h, a.Command, a.Workdir); err != nil {
		return Result{}, err
	}
	task, err := h.StartBackground(ctx, a.Command, sandbox.ExecOptions{Workdir: a.Workdir, Env: a.Env})
	if err != nil {
		return Result{}, err
	}
	res, err := wait(ctx, h, task.ID, blockUntil(a.BlockUntilMS), nil)
	if err != nil && ctx.Err() != nil {
		// The caller gave up (an MCP host cancelled the call, the agent
		// was interrupted): nobody holds the task id, so stop the command.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		_ = h.KillBackground(kctx, task.ID, false)
	}
	return res, err
}

func (o ShellOptions) check(ctx context.Context, h Sandbox, command, workdir string) error {
	p := o.Policy
	if p == nil {
		p = &Policy{Workspace: h.WorkspacePath()}
	}
	v := p.Decide(command, workdir)
	switch v.Decision {
	case Allow:
		return nil
	case Deny:
		return &Error{Code: CodePolicyDenied, Message: "command denied by policy rule " + v.Rule + ": " + v.Reason,
			Hint: "do not retry this command; find another way or explain to the user why it is needed"}
	}
	ok, reason, err := o.Approver.Approve(ctx, ApprovalRequest{Command: command, Workdir: workdir, Verdict: v})
	if err != nil {
		return fmt.Errorf("tools: approval: %w", err)
	}
	if !ok {
		return &Error{Code: CodeNotApproved, Message: "command not approved (rule " + v.Rule + "): " + reason,
			Hint: "do not retry this command; continue without it or ask the user"}
	}
	return nil
}

func awaitShell(ctx context.Context, h Sandbox, a awaitArgs) (Result, error) {
	var re *regexp.Regexp
	if a.Pattern != "" {
		var err error
		if re, err = regexp.Compile(a.Pattern); err != nil {
			return Result{}, &Error{Code: CodeInvalidPattern, Message: err.Error(), Hint: "use Go RE2 syntax", Err: err}
		}
	}
	return wait(ctx, h, a.TaskID, blockUntil(a.BlockUntilMS), re)
}

func killShell(ctx context.Context, h Sandbox, a killArgs) (Result, error) {
	if _, err := h.BackgroundStatus(ctx, a.TaskID); err != nil {
		return Result{}, err
	}
	if err := h.KillBackground(ctx, a.TaskID, false); err != nil {
		return Result{}, err
	}
	st, err := h.BackgroundStatus(ctx, a.TaskID)
	if err != nil {
		return Result{}, err
	}
	out, err := collect(ctx, h, a.TaskID)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: render(a.TaskID, "killed", st, out, 0, "")}, nil
}

// wait polls the task until it ends, its output matches re, or d passes.
func wait(ctx context.Context, h Sandbox, id string, d time.Duration, re *regexp.Regexp) (Result, error) {
	deadline := time.Now().Add(d)
	delay := pollEvery
	var off int64
	var seen strings.Builder // output so far, for the pattern (bounded)
	progress := progressFrom(ctx)
	var poff int64 // how much output progress has seen
	for {
		st, err := h.BackgroundStatus(ctx, id)
		if err != nil {
			return Result{}, err
		}
		if !st.Alive {
			out, err := collect(ctx, h, id)
			if err != nil {
				return Result{}, err
			}
			return Result{Text: render(id, "completed", st, out, 0, "")}, nil
		}
		if re != nil {
			o, err := h.ReadBackgroundOutput(ctx, id, off, 0)
			if err != nil {
				return Result{}, err
			}
			off = o.NextOffset
			seen.WriteString(o.Text)
			if m := re.FindString(seen.String()); m != "" {
				return running(ctx, h, id, d, "pattern matched: "+oneLine(m))
			}
			if seen.Len() > maxCollect {
				s := seen.String()[seen.Len()-tailBytes:]
				seen.Reset()
				seen.WriteString(s)
			}
		}
		if progress != nil {
			o, err := h.ReadBackgroundOutput(ctx, id, poff, maxProgressBytes)
			if err != nil {
				return Result{}, err
			}
			if o.NextOffset > poff && o.Text != "" {
				progress(o.Text)
			}
			poff = max(poff, o.NextOffset)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return running(ctx, h, id, d, "")
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, maxPollWait)
	}
}

func running(ctx context.Context, h Sandbox, id string, waited time.Duration, note string) (Result, error) {
	out, err := collect(ctx, h, id)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: render(id, "running", sandbox.BackgroundState{Alive: true}, out, waited, note)}, nil
}

// logText is the head and tail of a task's log.
type logText struct {
	text    string
	total   int64
	dropped int64
}

// collect reads the task's whole log, keeping at most maxCollect bytes
// (head and tail).
func collect(ctx context.Context, h Sandbox, id string) (logText, error) {
	buf := driver.NewBoundedBuffer(maxCollect)
	var off int64
	for {
		o, err := h.ReadBackgroundOutput(ctx, id, off, 256<<10)
		if err != nil {
			return logText{}, err
		}
		if o.NextOffset == off {
			break
		}
		buf.Write([]byte(o.Text))
		off = o.NextOffset
	}
	text, dropped := buf.Text()
	return logText{text: text, total: buf.Total(), dropped: dropped}, nil
}

func render(id, status string, st sandbox.BackgroundState, out logText, waited time.Duration, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s\ntask_id: %s\n", status, id)
	if !st.Alive {
		fmt.Fprintf(&b, "exit_code: %d\n", st.ExitCode)
		if st.Signal != "" {
			fmt.Fprintf(&b, "signal: %s\n", st.Signal)
		}
	}
	if note != "" {
		fmt.Fprintf(&b, "note: %s\n", note)
	}
	fmt.Fprintf(&b, "output_bytes: %d\n", out.total)
	text := out.text
	if st.Alive {
		if len(text) > tailBytes {
			text = "[... earlier output omitted ...]\n" + tailOf(text, tailBytes)
		}
		next := min(max(2*waited, 30*time.Second), maxBlockUntil)
		fmt.Fprintf(&b, "next: still running after %s; call await_shell with task_id %q and block_until_ms %d, or kill_shell\n",
			waited.Round(time.Millisecond), id, next.Milliseconds())
		b.WriteString("output (tail, stdout and stderr together):\n")
	} else {
		b.WriteString("output (stdout and stderr together):\n")
	}
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	return b.String()
}

func tailOf(s string, n int) string {
	i := len(s) - n
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 && j < n/2 {
		return s[i+j+1:]
	}
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return s[i:]
}
