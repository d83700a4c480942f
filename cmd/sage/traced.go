package main

import (
	"context"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// openTraced opens the sandbox of a sandbox command line (name: "sage
// exec", "sage python", "sage fs read") inside a chain run of an observer
// with the OTLP export of the environment (observer), so that its sandbox
// events (acquire, the operation, release) are traced as those of a
// session's daemon are. Call end once, with the run's error: it closes the
// sandbox, then ends the run.
func openTraced(ctx context.Context, name, session string, cfg sandbox.Config) (context.Context, *sandbox.Sandbox, func(error), error) {
	obs, shutdown, err := observer(ctx)
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx = obs.ChainStart(ctx, observability.ChainInfo{SessionID: session, Name: name})
	endRun := func(err error) {
		if err != nil {
			obs.ChainError(ctx, err)
		} else {
			obs.ChainEnd(ctx, observability.ChainResult{})
		}
		shutdown()
	}
	cfg.Observer = obs
	h, err := sandbox.New(ctx, cfg)
	if err != nil {
		endRun(err)
		return ctx, nil, nil, err
	}
	return ctx, h, func(err error) {
		h.Close(context.WithoutCancel(ctx))
		endRun(err)
	}, nil
}

// runTraced runs one command of sage exec or sage python in a sandbox of
// its own (openTraced), streaming its output unless asJSON, and reports
// its result (finish).
func runTraced(ctx context.Context, env *cliEnv, name string, sf *sandboxFlags, cfg sandbox.Config, asJSON bool,
	run func(context.Context, *sandbox.Sandbox, sandbox.ExecOptions) (*sandbox.CommandResult, error)) int {
	ctx, h, end, err := openTraced(ctx, name, sf.session, cfg)
	if err != nil {
		return fail(env, exitSandboxError, sf.named(err))
	}
	opts := sandbox.ExecOptions{Env: sf.env, Stdin: stdinIfPiped(env.stdin)}
	if !asJSON {
		opts.OnStdout = func(p []byte) { env.stdout.Write(p) }
		opts.OnStderr = func(p []byte) { env.stderr.Write(p) }
	}
	var res *sandbox.CommandResult
	defer func() { end(err) }() // closes the sandbox after finish, as the run's error
	res, err = run(ctx, h, opts)
	return finish(env, res, err, driver.CommandTimeout(0, cfg.Timeout), asJSON)
}
