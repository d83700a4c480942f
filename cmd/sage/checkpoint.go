package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

// checkpointSubcommands are the `sage session` subcommands of a session's
// checkpoints (docs/checkpoints.md); they talk to a running daemon, never
// start one.
var checkpointSubcommands = map[string]string{
	"checkpoint":  "sage session checkpoint SESSION",
	"checkpoints": "sage session checkpoints SESSION [--json]",
	"rollback":    "sage session rollback SESSION ID | --turn N",
	"fork":        "sage session fork SESSION ID NEW",
	"sync":        "sage session sync SESSION",
}

func runCheckpoint(ctx context.Context, env *cliEnv, args []string) int {
	op := args[0]
	fs := newFlagSet("sage session "+op, checkpointSubcommands[op])
	var asJSON *bool
	if op == "checkpoints" {
		asJSON = fs.Bool("json", false, "print JSON")
	}
	turn := -1
	if op == "rollback" {
		fs.IntVar(&turn, "turn", -1, "roll back to the state after agent turn `N` (0: before the first) of sage agent --checkpoints")
	}
	pos, code, stop := parseFlagsInterspersed(env, fs, args[1:])
	if stop {
		return code
	}
	want := map[string]int{"checkpoint": 1, "checkpoints": 1, "rollback": 2, "fork": 3, "sync": 1}[op]
	if op == "rollback" && flagSet(fs, "turn") {
		if turn < 0 {
			return usageError(env, fs.Name(), "--turn %d is negative; want a turn number, 0 for the state before the first", turn)
		}
		want = 1
	}
	if len(pos) != want {
		return usageError(env, fs.Name(), "want %s", checkpointSubcommands[op])
	}
	for i, name := range pos {
		if i == 0 || i == 2 {
			if err := sessiond.CheckName(name); err != nil {
				return usageError(env, fs.Name(), "%v", err)
			}
		}
	}
	dir, err := sessiond.Dir(sandbox.Home(), pos[0])
	if err != nil {
		return fail(env, exitUsage, err)
	}
	call := func(r sessiond.CheckpointRequest) (sessiond.Response, error) {
		return sessiond.Call(ctx, dir, sessiond.Request{Op: sessiond.OpCheckpoint, Checkpoint: &r}, sessiond.Streams{})
	}
	failed := func(err error) int { return checkpointFailed(env, fs.Name(), pos[0], err) }
	switch op {
	case "checkpoint":
		r, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointSave})
		if err != nil {
			return failed(err)
		}
		if len(r.Checkpoints) != 1 {
			return failed(errors.New("the daemon answered without the checkpoint"))
		}
		fmt.Fprintln(env.stdout, r.Checkpoints[0].ID)
	case "checkpoints":
		r, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointList})
		if err != nil {
			return failed(err)
		}
		if *asJSON {
			if r.Checkpoints == nil {
				r.Checkpoints = []sandbox.Checkpoint{}
			}
			return printJSON(env, r.Checkpoints)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tSIZE\tTURN\tLAYERS\tCOST")
		for _, c := range r.Checkpoints {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", c.ID, c.Time.Local().Format(time.DateTime), c.Size, turnsText(c.Turns), c.Layers,
				costText(c.Duration))
		}
		tw.Flush()
	case "rollback":
		if want == 1 { // --turn N
			r, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointList})
			if err != nil {
				return failed(err)
			}
			cp, err := sandbox.CheckpointOfTurn(r.Checkpoints, turn)
			if err != nil {
				return turnFailed(env, fs.Name(), pos[0], err)
			}
			if _, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointRollback, ID: string(cp.ID)}); err != nil {
				return failed(err)
			}
			fmt.Fprintf(env.stdout, "rolled back %s to turn %d (%s)\n", pos[0], turn, cp.ID)
			return 0
		}
		if _, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointRollback, ID: pos[1]}); err != nil {
			return failed(err)
		}
		fmt.Fprintf(env.stdout, "rolled back %s to %s\n", pos[0], pos[1])
	case "sync":
		if _, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointSync}); err != nil {
			return failed(err)
		}
	case "fork":
		ws := filepath.Join(sandbox.Home(), "sessions", pos[2], "workspace")
		if _, err := call(sessiond.CheckpointRequest{Op: sessiond.CheckpointExport, ID: pos[1], Dir: ws}); err != nil {
			return failed(err)
		}
		fmt.Fprintf(env.stdout, "forked %s at %s into %s (%s); its first command starts it: sage exec --session %s --checkpoints ...\n",
			pos[0], pos[1], pos[2], ws, pos[2])
	}
	return 0
}

// turnsText is the TURN column: "-" for none, "3", or "3-5" for turns
// that changed nothing after the first (they are consecutive).
func turnsText(turns []int) string {
	switch len(turns) {
	case 0:
		return "-"
	case 1:
		return strconv.Itoa(turns[0])
	}
	lo, hi := slices.Min(turns), slices.Max(turns)
	if hi-lo+1 == len(turns) {
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	parts := make([]string, len(turns))
	for i, t := range turns {
		parts[i] = strconv.Itoa(t)
	}
	return strings.Join(parts, ",")
}

// turnFailed reports a --turn that names no checkpoint: no agent turns at
// all, or not that one.
func turnFailed(env *cliEnv, name, session string, err error) int {
	fmt.Fprintf(env.stderr, "%s: session %s: %s (sage session checkpoints %s lists them)\n", name, session,
		strings.TrimPrefix(oneLine(err.Error()), "sandbox: "), session)
	return exitFailed
}

func checkpointFailed(env *cliEnv, name, session string, err error) int {
	switch {
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, sessiond.ErrNotRunning):
		fmt.Fprintf(env.stderr, "%s: session %s is not running; fix: start it with sage exec --session %s --checkpoints ... (its checkpoints are kept)\n", name, session, session)
		return exitFailed
	case errors.Is(err, sandbox.ErrUnknownCheckpoint):
		fmt.Fprintf(env.stderr, "%s: session %s has no such checkpoint (sage session checkpoints %s lists them)\n", name, session, session)
		return exitFailed
	}
	fmt.Fprintf(env.stderr, "%s: session %s: %s\n", name, session, oneLine(err.Error()))
	return exitSandboxError
}

// costText is what taking a checkpoint cost, in milliseconds ("-": not
// known, a checkpoint of an older daemon).
func costText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
