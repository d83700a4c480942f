package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

// UndoTool returns the undo tool: it rolls the workspace back to the
// state before the last agent turn that changed files, or to the state
// after a given turn, through the checkpoints sage agent --checkpoints
// (agent.Config.Checkpoints) takes. It is off unless given: the policy's
// "undo: true" or sage agent --undo. Only files are restored; processes
// keep running.
func UndoTool() Tool {
	return NewFunc("undo", "Undo changes to the workspace files: with no turn, restore the files as they were before "+
		"the last turn that changed any (a turn is one of your replies with its tool calls); with turn N, as they were "+
		"after turn N (0: before the first). Later changes are lost. Running processes are not stopped or restored. "+
		"Call it alone, not beside other tools.", undo)
}

type undoArgs struct {
	Turn *int `json:"turn,omitempty" jsonschema_description:"the turn whose end state to restore (0: before the first turn); default: before the last turn that changed files" jsonschema:"minimum=0"`
}

// turnRollbacker is what undo needs of the sandbox; *sandbox.Sandbox has
// it.
type turnRollbacker interface {
	Checkpoints(ctx context.Context) ([]sandbox.Checkpoint, error)
	Rollback(ctx context.Context, id sandbox.CheckpointID) error
}

func undo(ctx context.Context, h Sandbox, a undoArgs) (Result, error) {
	rb, ok := h.(turnRollbacker)
	if !ok {
		return Result{}, &Error{Code: CodeUnsupported, Message: "this sandbox keeps no checkpoints",
			Hint: "the agent must run with checkpoints (sage agent --checkpoints)"}
	}
	list, err := rb.Checkpoints(ctx)
	if err != nil {
		if errors.Is(err, sandbox.ErrUnsupported) {
			return Result{}, &Error{Code: CodeUnsupported, Message: "this sandbox keeps no checkpoints",
				Hint: "the agent must run with checkpoints (sage agent --checkpoints)", Err: err}
		}
		return Result{}, err
	}
	var turned []sandbox.Checkpoint // the checkpoints of turns, oldest first
	for _, c := range list {
		if len(c.Turns) > 0 {
			turned = append(turned, c)
		}
	}
	if len(turned) == 0 {
		return Result{}, &Error{Code: CodeNotFound, Message: "no turn has a checkpoint yet", Hint: "undo works once a turn has ended"}
	}
	target := turned[len(turned)-1]
	if a.Turn != nil {
		if target, err = sandbox.CheckpointOfTurn(list, *a.Turn); err != nil {
			return Result{}, &Error{Code: CodeNotFound, Message: strings.TrimPrefix(err.Error(), "sandbox: "), Err: err}
		}
	} else if len(turned) > 1 {
		target = turned[len(turned)-2]
	}
	var undone []int // the turns of the checkpoints the rollback drops
	for i, c := range list {
		if c.ID == target.ID {
			for _, d := range list[i+1:] {
				undone = append(undone, d.Turns...)
			}
		}
	}
	if err := rb.Rollback(ctx, target.ID); err != nil {
		if errors.Is(err, sandbox.ErrCheckpointBusy) {
			return Result{}, &Error{Code: CodeSandbox, Message: "a file is open for writing in the workspace; nothing changed",
				Hint: "stop the background task that writes, then undo again", Err: err}
		}
		return Result{}, err
	}
	var b strings.Builder
	if last := slices.Max(target.Turns); last == 0 {
		b.WriteString("restored the workspace files to their state before the first turn")
	} else {
		fmt.Fprintf(&b, "restored the workspace files to their state after turn %d", last)
	}
	if len(undone) > 0 {
		fmt.Fprintf(&b, "; undone: the changes of turn %s", strings.Trim(fmt.Sprint(undone), "[]"))
	}
	b.WriteString(" and any file written since; running processes were not stopped or restored\n")
	return Result{Text: b.String()}, nil
}
