package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sage-go/sage/sagents/sandbox"
)

func init() {
	register(command{"exec", "run a command in the session's sandbox", runExec})
}

func runExec(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sage exec", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var sf sandboxFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON instead of streaming output")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: sage exec [flags] [--] CMD [ARGS]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	h, err := openSandbox(ctx, &sf)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	opts := sandbox.ExecOptions{Env: sf.env, Stdin: stdinIfPiped(env.stdin)}
	if !*asJSON {
		opts.OnStdout = func(p []byte) { env.stdout.Write(p) }
		opts.OnStderr = func(p []byte) { env.stderr.Write(p) }
	}
	res, err := h.ExecuteCommand(ctx, shellJoin(fs.Args()), opts)
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fail(env, exitSandboxError, err)
		}
	} else if res.CPUTimeExceeded {
		fmt.Fprintln(env.stderr, "sage: the command used up its CPU time limit (all its processes together) and was killed")
	}
	return exitCode(res)
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

func openSandbox(ctx context.Context, sf *sandboxFlags) (sandbox.Handle, error) {
	cfg, err := sf.config()
	if err != nil {
		return nil, err
	}
	return sandbox.New(ctx, cfg)
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

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return exitUsage
}
