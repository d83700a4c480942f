package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

func init() {
	register(command{"python", "run Python code in the session's sandbox (its own venv)", runPython})
}

type reqList []string

func (r *reqList) String() string     { return strings.Join(*r, ",") }
func (r *reqList) Set(s string) error { *r = append(*r, s); return nil }

func runPython(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sage python", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var sf sandboxFlags
	sf.register(fs)
	var reqs reqList
	fs.Var(&reqs, "requirements", "a pip requirement to install first (repeatable)")
	code := fs.String("c", "", "the code to run")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: sage python [flags] (-c CODE | FILE)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	src, err := pythonSource(*code, fs.Args())
	if err != nil {
		fmt.Fprintln(env.stderr, "sage python:", err)
		fs.Usage()
		return exitUsage
	}
	h, err := openSandbox(ctx, &sf)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	opts := sandbox.PythonOptions{Requirements: reqs, ExecOptions: sandbox.ExecOptions{Env: sf.env, Stdin: stdinIfPiped(env.stdin),
		OnStdout: func(p []byte) { env.stdout.Write(p) }, OnStderr: func(p []byte) { env.stderr.Write(p) }}}
	res, err := h.ExecutePython(ctx, src, opts)
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	return exitCode(res)
}

// pythonSource takes -c CODE or one FILE read on the host.
func pythonSource(code string, args []string) (string, error) {
	switch {
	case code != "" && len(args) == 0:
		return code, nil
	case code == "" && len(args) == 1:
		b, err := os.ReadFile(args[0])
		return string(b), err
	}
	return "", fmt.Errorf("give either -c CODE or one FILE")
}
