package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

func init() {
	register(command{"sandboxd", "serve a sandbox over the AIO Sandbox HTTP API", runSandboxd})
}

type sandboxdFlags struct {
	serveFlags
	workspace, mode, token string
	maxBody                int64
	timeout                time.Duration
}

func (f *sandboxdFlags) register(fs *flag.FlagSet) {
	f.serveFlags.register(fs, "127.0.0.1:8080")
	fs.StringVar(&f.workspace, "workspace", "", "host workspace directory (required)")
	fs.StringVar(&f.mode, "mode", string(sandbox.Local), "sandbox mode: local or passthrough (passthrough is UNISOLATED)")
	fs.StringVar(&f.token, "token", os.Getenv("SAGE_SANDBOXD_TOKEN"), "bearer token required from clients (default $SAGE_SANDBOXD_TOKEN); required off loopback")
	fs.Int64Var(&f.maxBody, "max-body", 32<<20, "request body limit in bytes")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "timeout of commands sent without hard_timeout")
}

func runSandboxd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage sandboxd", "sage sandboxd --workspace DIR [flags]")
	var f sandboxdFlags
	f.register(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(env.stderr, "sage sandboxd: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	h, err := f.openSandbox(ctx, logger)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	srv, err := aioserver.New(aioserver.Options{Handle: h, Token: f.token, MaxBodyBytes: f.maxBody,
		DefaultTimeout: f.timeout, Version: "sage-sandboxd " + buildVersion(), Logger: logger})
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	if err := srv.Ready(ctx); err != nil {
		return fail(env, exitSandboxError, err)
	}
	err = aioserver.Serve(ctx, srv, aioserver.ServeOptions{Listen: f.listen, Announce: env.stdout,
		ReadHeaderTimeout: f.headerTimeout, ShutdownGrace: f.grace, Logger: logger})
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

func (f *sandboxdFlags) check() error {
	switch {
	case f.workspace == "":
		return errors.New("--workspace is required")
	case f.mode != string(sandbox.Local) && f.mode != string(sandbox.Passthrough):
		return fmt.Errorf("--mode %q: want local or passthrough", f.mode)
	case f.token == "" && !aioserver.LoopbackAddr(f.listen):
		return fmt.Errorf("--listen %s is not a loopback address: set --token (an unauthenticated exec API must not be reachable from the network)", f.listen)
	}
	return nil
}

// openSandbox creates the served Handle. Outside passthrough mode the
// process is marked as a server (SAGE_SERVER_PROCESS=1), so nothing in it
// can fall back to unisolated execution.
func (f *sandboxdFlags) openSandbox(ctx context.Context, logger *slog.Logger) (sandbox.Handle, error) {
	if f.mode == string(sandbox.Passthrough) {
		logger.Warn("sandboxd: --mode passthrough runs every command UNISOLATED on this host, as this user; use it for tests and debugging only")
	} else if err := os.Setenv("SAGE_SERVER_PROCESS", "1"); err != nil {
		return nil, err
	}
	return sandbox.New(ctx, sandbox.Config{Mode: sandbox.Type(f.mode), Workspace: f.workspace})
}
