package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

func init() {
	register(command{"python", "run Python code in the session's sandbox (its own venv)", runPython})
}

type reqList []string

func (r *reqList) String() string     { return strings.Join(*r, ",") }
func (r *reqList) Set(s string) error { *r = append(*r, s); return nil }

func runPython(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage python", "sage python [flags] -c CODE", "sage python [flags] FILE")
	var sf sandboxFlags
	sf.register(fs)
	var reqs reqList
	fs.Var(&reqs, "requirements", "a pip `requirement` to install first (repeatable)")
	code := fs.String("c", "", "the `code` to run")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of streaming output")
	var df daemonFlags
	df.registerIdle(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	src, err := pythonSource(*code, fs.Args())
	if err != nil {
		return usageError(env, "sage python", "%v", err)
	}
	cfg, err := sf.config()
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if usesDaemon(sessionFlagGiven(fs), cfg) {
		// The session's daemon runs it: same venv, /tmp and processes
		// as sage exec --session.
		req := sessiond.Request{Op: sessiond.OpPython, Code: src, Requirements: reqs, Env: sf.env}
		return execInDaemon(ctx, env, sf.session, cfg, df, req, stdinIfPiped(env.stdin), *asJSON)
	}
	if df.idle.set {
		return usageError(env, "sage python", "--idle-timeout needs --session S in local mode on Linux (a session daemon)")
	}
	return runTraced(ctx, env, "sage python", &sf, cfg, *asJSON,
		func(ctx context.Context, h *sandbox.Sandbox, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
			return h.ExecutePython(ctx, src, sandbox.PythonOptions{Requirements: reqs,
				OnSetup: slowStepNotice(env.stderr, sessiond.SlowStepAfter), ExecOptions: opts})
		})
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

// slowStepNotice prints "sage: STEP..." for a slow set-up step, as the
// session daemon does.
var slowStepNotice = sessiond.SlowStepNotice
