package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

func init() {
	register(command{"session", "list (ls) or stop the session daemons that `sage exec --session` starts", runSession},
		subcommand{"ls", "list the live sessions: pid, age, idle time, memory"},
		subcommand{"stop", "stop sessions: kill all their processes (workspace files are kept)"},
		subcommand{"checkpoint", "save the workspace of a session run with --checkpoints; prints the id"},
		subcommand{"checkpoints", "list a session's checkpoints (id, time, size, agent turn, layers)"},
		subcommand{"rollback", "make a session's workspace a checkpoint's, or an agent turn's (--turn N), again (later ones are dropped)"},
		subcommand{"fork", "copy a checkpoint into the workspace of a new session NEW"},
		subcommand{"sync", "write a session's live workspace into its host folder (Close does it too)"},
		subcommand{"serve", "serve one session in the foreground (sage exec --session starts it; sandbox config as JSON on stdin)"})
}

// describeTimeout bounds one daemon's answer to ls.
const describeTimeout = 5 * time.Second

func runSession(ctx context.Context, env *cliEnv, args []string) int {
	var fs *flag.FlagSet
	var asJSON, all, trace *bool
	var idle *time.Duration
	if _, ok := checkpointSubcommands[args[0]]; ok {
		return runCheckpoint(ctx, env, args)
	}
	switch args[0] {
	case "ls":
		fs = newFlagSet("sage session ls", "sage session ls [--json]")
		asJSON = fs.Bool("json", false, "print JSON")
	case "stop":
		fs = newFlagSet("sage session stop", "sage session stop SESSION... | --all")
		all = fs.Bool("all", false, "stop every live session")
	default:
		fs = newFlagSet("sage session serve", "sage session serve [--idle-timeout D] [--trace] SESSION < config.json")
		idle = fs.Duration("idle-timeout", sessiond.DefaultIdleTimeout, "stop after this long without a command (0 = never)")
		trace = fs.Bool("trace", false, "print each request's trace tree to the log (OTLP export follows OTEL_EXPORTER_OTLP_*ENDPOINT, as in every sage command)")
	}
	rest, code, stop := parseFlagsInterspersed(env, fs, args[1:])
	if stop {
		return code
	}
	for _, name := range rest {
		if err := sessiond.CheckName(name); err != nil {
			return usageError(env, fs.Name(), "%v", err)
		}
	}
	switch args[0] {
	case "ls":
		if len(rest) > 0 {
			return usageError(env, fs.Name(), "unexpected argument %q", rest[0])
		}
		return sessionLs(ctx, env, *asJSON)
	case "stop":
		if *all == (len(rest) > 0) {
			return usageError(env, fs.Name(), "name the SESSIONs to stop, or --all")
		}
		return sessionStop(ctx, env, rest, *all)
	}
	if len(rest) != 1 {
		return usageError(env, fs.Name(), "name one SESSION")
	}
	if *idle < 0 {
		return usageError(env, fs.Name(), "--idle-timeout %v is negative (0 means never)", *idle)
	}
	return serveDaemon(ctx, env, rest[0], *idle, *trace)
}

// sessionRow is one line of `sage session ls`.
type sessionRow struct {
	*sessiond.Info
	Age  time.Duration `json:"age_ns"`
	Idle time.Duration `json:"idle_ns"`
}

// liveSessions asks every session directory's daemon about itself;
// sessions without a live daemon are left out.
func liveSessions(ctx context.Context) []sessionRow {
	ents, _ := os.ReadDir(filepath.Join(sandbox.Home(), "sessions"))
	var rows []sessionRow
	for _, e := range ents {
		dir, err := sessiond.Dir(sandbox.Home(), e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, describeTimeout)
		info, err := sessiond.Describe(cctx, dir)
		cancel()
		if err != nil {
			continue
		}
		row := sessionRow{Info: info, Age: time.Since(info.Started).Round(time.Second)}
		if info.Busy == 0 {
			row.Idle = time.Since(info.LastUsed).Round(time.Second)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

func sessionLs(ctx context.Context, env *cliEnv, asJSON bool) int {
	rows := liveSessions(ctx)
	if asJSON {
		if rows == nil {
			rows = []sessionRow{}
		}
		return printJSON(env, rows)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tPID\tAGE\tIDLE\tMEMORY\tIDLE TIMEOUT")
	for _, r := range rows {
		idle := r.Idle.String()
		if r.Busy > 0 {
			idle = fmt.Sprintf("busy (%d)", r.Busy)
		}
		timeout := r.IdleTimeout.String()
		if r.IdleTimeout == 0 {
			timeout = "never"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.PID, r.Age, idle, mib(r.MemoryBytes), timeout)
	}
	tw.Flush()
	return 0
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func sessionStop(ctx context.Context, env *cliEnv, names []string, all bool) int {
	if all {
		for _, r := range liveSessions(ctx) {
			names = append(names, r.Name)
		}
	}
	code := 0
	for _, name := range names {
		dir, err := sessiond.Dir(sandbox.Home(), name)
		if err != nil {
			return fail(env, exitUsage, err)
		}
		err = sessiond.Stop(ctx, dir)
		switch {
		case errors.Is(err, sessiond.ErrNotRunning) && !all:
			fmt.Fprintf(env.stderr, "sage session stop: session %s is not running ('sage session ls' lists the live ones)\n", name)
			code = exitFailed
		case err != nil && !errors.Is(err, sessiond.ErrNotRunning):
			fmt.Fprintf(env.stderr, "sage: session %s: %v\n", name, oneLine(err.Error()))
			code = exitSandboxError
		case err == nil:
			fmt.Fprintf(env.stdout, "stopped %s\n", name)
		}
	}
	return code
}
