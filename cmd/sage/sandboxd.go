package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sage-go/sage/cmd/internal/serveflags"
	"github.com/sage-go/sage/sagents/mcpserver"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

func init() {
	register(command{"sandboxd", "serve a sandbox over the AIO Sandbox HTTP API and MCP (/mcp)", runSandboxd})
}

type sandboxdFlags struct {
	serveflags.Flags
	toolFlags
	workspace, mode, token string
	virtualWorkspace       string
	noToken                bool
	checkpoints            bool
	allowedHosts           hostList
	allowedOrigins         hostList
	maxBody, maxRead       int64
	maxEntries             int
	timeout                time.Duration
}

// hostList is a repeatable flag; each value may also be a comma list.
type hostList []string

func (l *hostList) String() string { return strings.Join(*l, ",") }

func (l *hostList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func (f *sandboxdFlags) register(fs *flag.FlagSet) {
	f.Flags.Register(fs, "127.0.0.1:8080")
	fs.StringVar(&f.workspace, "workspace", "", "host workspace directory (required)")
	fs.StringVar(&f.virtualWorkspace, "virtual-workspace", "", "where the workspace appears inside a local sandbox, e.g. /mnt/user-data as DeerFlow expects (default /workspace; passthrough mode always shows the host path)")
	fs.StringVar(&f.mode, "mode", string(sandbox.Local), "sandbox mode: local or passthrough (passthrough is UNISOLATED)")
	fs.StringVar(&f.token, "token", os.Getenv("SAGE_SANDBOXD_TOKEN"), "bearer token required from clients (default $SAGE_SANDBOXD_TOKEN, else on loopback a random one saved in $SAGE_HOME/sandboxd/token); required off loopback")
	fs.BoolVar(&f.noToken, "no-token", false, "on loopback, serve without a token (any local user and process can then run commands)")
	if v := os.Getenv("SAGE_SANDBOXD_ALLOWED_HOSTS"); v != "" {
		_ = f.allowedHosts.Set(v)
	}
	fs.Var(&f.allowedHosts, "allowed-host", "Host header value to serve besides loopback ones and the listening IP, e.g. sandbox.example (repeatable; default $SAGE_SANDBOXD_ALLOWED_HOSTS)")
	fs.Var(&f.allowedOrigins, "allowed-origin", "browser Origin to accept besides the server's own, e.g. https://app.example (repeatable)")
	fs.Int64Var(&f.maxBody, "max-body", 32<<20, "request body limit in bytes")
	fs.Int64Var(&f.maxRead, "max-read", 16<<20, "largest file POST /v1/file/read returns, in bytes (GET /v1/file/download streams any size)")
	fs.IntVar(&f.maxEntries, "max-entries", sandbox.DefaultMaxEntries, "entries read by one listing, find or grep; past it the answer says truncated")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "timeout of commands sent without hard_timeout")
	fs.BoolVar(&f.checkpoints, "checkpoints", false, "local: keep the workspace as overlay layers: /v1/sage/checkpoints and the checkpoint MCP tools work (docs/checkpoints.md)")
	f.toolFlags.register("/mcp", fs)
}

func runSandboxd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage sandboxd", "sage sandboxd --workspace DIR [flags]")
	var f sandboxdFlags
	f.register(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if err := f.check(); err != nil {
		return usageError(env, fs.Name(), "%v", err)
	}
	if err := f.toolFlags.check(); err != nil {
		return fail(env, exitUsage, err)
	}
	if f.token == "" && !f.noToken {
		tok, created, err := aioserver.LoadOrCreateToken(aioapi.TokenFile())
		if err != nil {
			return fail(env, exitSandboxError, err)
		}
		f.token = tok
		verb := "reusing"
		if created {
			verb = "saved"
		}
		fmt.Fprintf(env.stderr, "sage sandboxd: clients must send \"Authorization: Bearer %s\" (%s in %s, where sage finds it for loopback URLs; --no-token turns this off)\n",
			tok, verb, aioapi.TokenFile())
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	h, err := f.openSandbox(ctx, logger)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	mcpSrv, shutdown, err := f.mcpServer(ctx, h, logger)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer shutdown()
	var quiet func(context.Context) // the server's StopIdleShells, set before it serves
	ckpt := checkpointAPI(h, func(ctx context.Context) { quiet(ctx) })
	srv, err := aioserver.New(aioserver.Options{Handle: h, Token: f.token, MaxBodyBytes: f.maxBody,
		Mounts:         map[string]http.Handler{"/mcp": mcpSrv.Handler(), "/v1/sage/": ckpt},
		MCPServers:     map[string]aioserver.ToolServer{"sage": mcpSrv},
		DefaultTimeout: f.timeout, Version: "sage-sandboxd " + buildVersion(), Logger: logger,
		AllowedHosts: f.allowedHosts, AllowedOrigins: f.allowedOrigins, MaxReadBytes: f.maxRead, MaxEntries: f.maxEntries})
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	quiet = srv.StopIdleShells
	if err := srv.Ready(ctx); err != nil {
		return fail(env, exitSandboxError, err)
	}
	err = aioserver.Serve(ctx, srv, aioserver.ServeOptions{Listen: f.Listen, Announce: env.stdout,
		ReadHeaderTimeout: f.ReadHeaderTimeout, ShutdownGrace: f.ShutdownGrace, Logger: logger})
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

func (f *sandboxdFlags) check() error {
	if err := f.Flags.Check(); err != nil {
		return err
	}
	switch {
	case f.workspace == "":
		return errors.New("--workspace is required")
	case f.mode != string(sandbox.Local) && f.mode != string(sandbox.Passthrough):
		return fmt.Errorf("--mode %q: want local or passthrough", f.mode)
	case f.noToken && f.token != "":
		return errors.New("--no-token and a token (--token or $SAGE_SANDBOXD_TOKEN) contradict each other: drop one")
	case f.noToken && !aioserver.LoopbackAddr(f.Listen):
		return fmt.Errorf("--no-token is refused on --listen %s, which is not a loopback address: set --token", f.Listen)
	case f.token == "" && !aioserver.LoopbackAddr(f.Listen):
		return fmt.Errorf("--listen %s is not a loopback address: set --token (an unauthenticated exec API must not be reachable from the network)", f.Listen)
	case f.checkpoints && f.mode == string(sandbox.Passthrough):
		return errors.New("--checkpoints needs --mode local (passthrough has no layers to keep)")
	case f.virtualWorkspace != "" && f.mode == string(sandbox.Passthrough):
		return fmt.Errorf("--virtual-workspace %s: passthrough mode shows the host path; use --mode local or drop the flag", f.virtualWorkspace)
	case f.maxRead <= 0 || f.maxEntries <= 0 || f.maxBody <= 0:
		return errors.New("--max-read, --max-entries and --max-body must be positive")
	}
	return nil
}

// openSandbox creates the served Handle. Outside passthrough mode the
// process is marked as a server (SAGE_SERVER_PROCESS=1), so nothing in it
// can fall back to unisolated execution.
func (f *sandboxdFlags) openSandbox(ctx context.Context, logger *slog.Logger) (*sandbox.Sandbox, error) {
	if f.mode == string(sandbox.Passthrough) {
		logger.Warn("sandboxd: --mode passthrough runs every command UNISOLATED on this host, as this user; use it for tests and debugging only")
	} else if err := os.Setenv("SAGE_SERVER_PROCESS", "1"); err != nil {
		return nil, err
	}
	// A server's session sandbox (local mode) starts with it, not with
	// its first request.
	return sandbox.New(ctx, sandbox.Config{Mode: sandbox.Type(f.mode), Workspace: f.workspace, VirtualWorkspace: f.virtualWorkspace,
		Local: sandbox.LocalConfig{Prestart: true, Checkpoints: f.checkpoints}})
}

// mcpServer serves the sandbox's tools over MCP: streamable HTTP at
// sandboxd's /mcp, and the AIO API's /v1/mcp/sage/tools endpoints.
func (f *sandboxdFlags) mcpServer(ctx context.Context, h *sandbox.Sandbox, logger *slog.Logger) (*mcpserver.Server, func(), error) {
	obs, shutdown, err := observer(ctx)
	if err != nil {
		return nil, nil, err
	}
	f.toolFlags.checkpoints, f.toolFlags.checkpointTools = f.checkpoints, true
	tm, err := f.manager(h, obs, hostApprover{})
	if err != nil {
		shutdown()
		return nil, nil, err
	}
	srv, err := mcpserver.New(tm, mcpserver.Options{Name: "sage-sandboxd", Version: buildVersion(), Files: h,
		Instructions: mcpInstructions(h), MaxRequestBytes: f.maxBody, Logger: logger})
	if err != nil {
		shutdown()
		return nil, nil, err
	}
	return srv, func() { _ = srv.Close(); shutdown() }, nil
}
