package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

func init() {
	register(command{"exec", "run a command in the session's sandbox", runExec})
}

func runExec(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage exec", "sage exec [flags] [--] CMD [ARGS]")
	var sf sandboxFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON instead of streaming output")
	var df daemonFlags
	df.register(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(env, "sage exec", "missing the command to run")
	}
	if err := tooLong(shellJoin(fs.Args()), sf.env, sessionFlagGiven(fs), sf.session); err != nil {
		return fail(env, exitUsage, err)
	}
	cfg, err := sf.config()
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if usesDaemon(sessionFlagGiven(fs), cfg) {
		stdin := stdinIfPiped(env.stdin)
		if df.background {
			stdin = nil
		}
		req := sessiond.Request{Op: sessiond.OpExec, Command: shellJoin(fs.Args()), Env: sf.env}
		return execInDaemon(ctx, env, sf.session, cfg, df, req, stdin, *asJSON)
	}
	if df.background || df.idle.set {
		return usageError(env, "sage exec", "--background and --idle-timeout need --session S in local mode on Linux (a session daemon)")
	}
	return runTraced(ctx, env, "sage exec", &sf, cfg, *asJSON,
		func(ctx context.Context, h *sandbox.Sandbox, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
			return h.ExecuteCommand(ctx, shellJoin(fs.Args()), opts)
		})
}

// finish reports a command's result: as JSON on stdout when asJSON, a
// timeout as one line on stderr, and returns the exit code.
func finish(env *cliEnv, res *sandbox.CommandResult, err error, timeout time.Duration, asJSON bool) int {
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	if asJSON {
		// exit_code is the code sage exits with: 124 for a timeout (the
		// signal that ended the command is in "signal").
		out := *res
		out.ExitCode = exitCode(res)
		if code := printJSON(env, &out); code != 0 {
			return code
		}
	} else if res.CPUTimeExceeded {
		fmt.Fprintln(env.stderr, "sage: the command used up its CPU time limit (all its processes together) and was killed")
	}
	if res.TimedOut {
		fmt.Fprintf(env.stderr, "sage: %s\n", timeoutText(timeout, res.Signal))
	}
	return exitCode(res)
}

func timeoutText(timeout time.Duration, signal string) string {
	s := "timed out after " + timeout.String()
	if signal != "" {
		s += " (killed by " + signal + ")"
	}
	return s
}

func exitCode(res *sandbox.CommandResult) int {
	switch {
	case res.TimedOut:
		return exitTimedOut
	case res.ExitCode < 0 || res.ExitCode > 255:
		return exitSandboxError
	}
	return res.ExitCode
}

// stdinIfPiped passes stdin on only when it is not a terminal: a
// sandboxed command in its own process group must not read the tty.
func stdinIfPiped(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return f
}

// tooLong refuses a command line or --env value over
// driver.MaxArgBytes, in every mode alike, naming the fix: the code
// in a file of the workspace.
func tooLong(command string, env map[string]string, sessionGiven bool, session string) error {
	err := driver.CheckArgs(command, env)
	var te *driver.ArgTooLongError
	if !errors.As(err, &te) {
		return err
	}
	s := ""
	if sessionGiven {
		s = " --session " + session
	}
	return badSetting("%s is %d bytes, over the %d a command takes in one argument (Linux caps one at 128 KiB); "+
		"fix: write it to a file in the workspace (sage fs write%s script.sh < script.sh) and run that (sage exec%s -- sh script.sh)",
		te.What, te.Len, driver.MaxArgBytes, s, s)
}
