package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

// CheckpointToolOptions configure [CheckpointTools].
type CheckpointToolOptions struct {
	// ForkDir maps the name of a new session to the empty host folder a
	// fork's files go to (sage mcp: $SAGE_HOME/sessions/NAME/workspace);
	// it refuses a bad name. Nil leaves the fork tool out.
	ForkDir func(name string) (string, error)
}

// CheckpointTools are the tools of a sandbox's checkpoints, for an MCP
// host that drives them (sage mcp and sage sandboxd with checkpoints on;
// docs/checkpoints.md): checkpoint, checkpoints, rollback and fork. A
// failure is a tool error: not_found for an unknown checkpoint or turn,
// unsupported where checkpoints are off, sandbox_error while a file is
// open for writing or a command runs, invalid_arguments for a bad fork
// target.
func CheckpointTools(o CheckpointToolOptions) []Tool {
	ts := []Tool{
		NewFunc("checkpoint", "Save the workspace files as a checkpoint, between commands, and return its id. An unchanged workspace costs nothing.", checkpointTool),
		NewFunc("checkpoints", "List the workspace's checkpoints, oldest first, as JSON: id, time, size (bytes added), layers and the agent turns whose end state it is.", checkpointsTool),
		NewFunc("rollback", "Restore the workspace files to a checkpoint (by id, or by the agent turn it ends); later checkpoints are dropped. Running processes are not stopped or restored.", rollbackTool),
	}
	if o.ForkDir != nil {
		ts = append(ts, NewFunc("fork", "Copy a checkpoint's files into the workspace of a new session, which starts from that state and shares nothing with this one.",
			func(ctx context.Context, h Sandbox, a forkArgs) (Result, error) {
				return forkTool(ctx, h, a, o.ForkDir)
			}))
	}
	return ts
}

type noArgs struct{}

type rollbackArgs struct {
	ID   string `json:"id,omitempty" jsonschema_description:"the checkpoint id (from checkpoints); give it or turn"`
	Turn *int   `json:"turn,omitempty" jsonschema_description:"the agent turn whose end state to restore (0: before the first); give it or id" jsonschema:"minimum=0"`
}

type forkArgs struct {
	ID      string `json:"id" jsonschema_description:"the checkpoint id (from checkpoints)"`
	Session string `json:"session" jsonschema_description:"the new session's name: 1-64 of A-Z a-z 0-9 _ -"`
}

// checkpointer is what the checkpoint tools need of the sandbox;
// *sandbox.Sandbox has it.
type checkpointer interface {
	turnRollbacker
	Checkpoint(ctx context.Context) (sandbox.Checkpoint, error)
	Export(ctx context.Context, id sandbox.CheckpointID, dir string) error
}

func asCheckpointer(h Sandbox) (checkpointer, error) {
	c, ok := h.(checkpointer)
	if !ok {
		return nil, noCheckpoints(nil)
	}
	return c, nil
}

func noCheckpoints(err error) error {
	return &Error{Code: CodeUnsupported, Message: "this sandbox keeps no checkpoints",
		Hint: "start the server with checkpoints on (--checkpoints, or sandbox.local.checkpoints: on) in local mode", Err: err}
}

// checkpointError is err as the tool error the model reads.
func checkpointError(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrUnsupported):
		return noCheckpoints(err)
	case errors.Is(err, sandbox.ErrUnknownCheckpoint):
		return &Error{Code: CodeNotFound, Message: strings.TrimPrefix(err.Error(), "sandbox: "), Hint: "checkpoints lists the ids and turns", Err: err}
	case errors.Is(err, sandbox.ErrCommandRunning):
		return &Error{Code: CodeSandbox, Message: "a command is running in the session; checkpoints are taken between commands",
			Hint: "wait for it to end (or stop it), then try again", Err: err}
	case errors.Is(err, sandbox.ErrCheckpointBusy):
		return &Error{Code: CodeSandbox, Message: "a file is open for writing in the workspace; nothing changed",
			Hint: "stop the background task that writes, then try again", Err: err}
	case errors.Is(err, fs.ErrExist):
		return &Error{Code: CodeInvalidArguments, Message: "the new session's workspace is not empty", Hint: "name a new session", Err: err}
	}
	return err
}

func checkpointTool(ctx context.Context, h Sandbox, _ noArgs) (Result, error) {
	c, err := asCheckpointer(h)
	if err != nil {
		return Result{}, err
	}
	cp, err := c.Checkpoint(ctx)
	if err != nil {
		return Result{}, checkpointError(err)
	}
	return Result{Text: fmt.Sprintf("checkpoint %s (%d bytes added)\n", cp.ID, cp.Size)}, nil
}

func checkpointsTool(ctx context.Context, h Sandbox, _ noArgs) (Result, error) {
	c, err := asCheckpointer(h)
	if err != nil {
		return Result{}, err
	}
	list, err := c.Checkpoints(ctx)
	if err != nil {
		return Result{}, checkpointError(err)
	}
	if list == nil {
		list = []sandbox.Checkpoint{}
	}
	b, _ := json.Marshal(list)
	return Result{Text: string(b) + "\n"}, nil
}

func rollbackTool(ctx context.Context, h Sandbox, a rollbackArgs) (Result, error) {
	c, err := asCheckpointer(h)
	if err != nil {
		return Result{}, err
	}
	if (a.ID == "") == (a.Turn == nil) {
		return Result{}, &Error{Code: CodeInvalidArguments, Message: "give either id or turn", Hint: "checkpoints lists both"}
	}
	id := sandbox.CheckpointID(a.ID)
	if a.Turn != nil {
		list, err := c.Checkpoints(ctx)
		if err != nil {
			return Result{}, checkpointError(err)
		}
		cp, err := sandbox.CheckpointOfTurn(list, *a.Turn)
		if err != nil {
			return Result{}, checkpointError(err)
		}
		id = cp.ID
	}
	if err := c.Rollback(ctx, id); err != nil {
		return Result{}, checkpointError(err)
	}
	return Result{Text: fmt.Sprintf("rolled the workspace back to %s; running processes were not stopped or restored\n", id)}, nil
}

func forkTool(ctx context.Context, h Sandbox, a forkArgs, dirOf func(string) (string, error)) (Result, error) {
	c, err := asCheckpointer(h)
	if err != nil {
		return Result{}, err
	}
	dir, err := dirOf(a.Session)
	if err != nil {
		return Result{}, &Error{Code: CodeInvalidArguments, Message: err.Error(), Hint: "name the session with 1-64 of A-Z a-z 0-9 _ -", Err: err}
	}
	if err := c.Export(ctx, sandbox.CheckpointID(a.ID), dir); err != nil {
		return Result{}, checkpointError(err)
	}
	return Result{Text: fmt.Sprintf("forked checkpoint %s into session %s (workspace %s); its first command starts it: sage exec --session %s --checkpoints ...\n",
		a.ID, a.Session, dir, a.Session)}, nil
}
