package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/sage-go/sage/sagents/mcpserver"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/otelsage"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
	"github.com/sage-go/sage/sagents/tools"
)

func init() {
	register(command{"mcp", "serve the session's sandbox tools to an MCP host (Claude Code, Cursor, ...) over stdio", runMCP})
}

type mcpFlags struct {
	sandboxFlags
	toolFlags
}

// toolFlags are the command policy flags of the tool servers (sage mcp,
// sandboxd's /mcp).
type toolFlags struct {
	policy     string
	approveAll bool
	// undo gives the model the undo tool (sage agent --undo, or the
	// policy's undo: true), with checkpoints on only.
	undo, checkpoints bool
	// checkpointTools adds the checkpoint tools (sage mcp, sandboxd),
	// with checkpoints on only.
	checkpointTools bool
}

func (f *toolFlags) register(fsName string, fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.policy, "policy", "", "command policy YAML `file` for the "+fsName+" tools (default: the built-in rules)")
	fs.BoolVar(&f.approveAll, "approve-all", false, "run commands the policy would ask about (ask rules); deny rules still apply")
}

// check reads the policy file before anything starts, so that a bad one
// is a bad setting with nothing to clean up.
func (f *toolFlags) check() error {
	if f.policy == "" {
		return nil
	}
	if _, err := tools.LoadPolicy(f.policy, "/workspace"); err != nil {
		return badSetting("--policy %s: %s", f.policy, strings.TrimPrefix(err.Error(), "tools: policy: "))
	}
	return nil
}

// manager builds the tools of h with the policy; an ask decision goes to
// ask (hostApprover: a not_approved error the host shows, naming
// --approve-all), unless --approve-all.
func (f *toolFlags) manager(h *sandbox.Sandbox, obs *observability.Manager, ask tools.Approver) (*tools.Manager, error) {
	shell := tools.ShellOptions{Approver: ask}
	if f.policy != "" {
		p, err := tools.LoadPolicy(f.policy, h.WorkspacePath())
		if err != nil {
			return nil, badSetting("--policy %s: %s", f.policy, strings.TrimPrefix(err.Error(), "tools: policy: "))
		}
		shell.Policy = p
	}
	if f.approveAll {
		shell.Approver = tools.ApproveAll{}
	}
	tm := tools.NewManager(h, tools.Options{Observer: obs})
	ts := tools.Builtins(tools.BuiltinOptions{Shell: shell})
	if f.checkpoints && (f.undo || shell.Policy != nil && shell.Policy.Undo) {
		ts = append(ts, tools.UndoTool())
	}
	if f.checkpoints && f.checkpointTools {
		ts = append(ts, tools.CheckpointTools(tools.CheckpointToolOptions{ForkDir: forkDir})...)
	}
	if err := tm.Register(ts...); err != nil {
		return nil, err
	}
	return tm, nil
}

// forkDir is the workspace of a fork into session name, as sage session
// fork makes it.
func forkDir(name string) (string, error) {
	if err := sessiond.CheckName(name); err != nil {
		return "", err
	}
	return filepath.Join(sandbox.Home(), "sessions", name, "workspace"), nil
}

// hostApprover refuses what the policy asks about: an MCP host cannot be
// asked through the protocol, so the error names the flag that allows it.
type hostApprover struct{}

func (hostApprover) Approve(_ context.Context, req tools.ApprovalRequest) (bool, string, error) {
	return false, "needs approval (" + req.Verdict.Reason + "); the sage server runs such commands only when started with --approve-all", nil
}

// observer returns an observability Manager with handlers registered and,
// when the environment asks for an export (an OTEL_EXPORTER_OTLP_*ENDPOINT,
// or OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER or OTEL_LOGS_EXPORTER
// naming one: console writes to stderr), OpenTelemetry traces, metrics and
// GenAI log events as otelsage.Setup reads the OTEL_* variables; the func
// shuts the export down.
func observer(ctx context.Context, handlers ...observability.Handler) (*observability.Manager, func(), error) {
	obs := observability.New(observability.Options{})
	obs.Register(handlers...)
	if !otelsage.ExportConfiguredFromEnv() {
		return obs, func() {}, nil
	}
	shutdown, err := otelsage.Setup(ctx, otelsage.SetupOptions{Manager: obs})
	if err != nil {
		return nil, nil, fmt.Errorf("opentelemetry: %w", err)
	}
	return obs, func() { _ = shutdown(context.WithoutCancel(ctx)) }, nil
}

func runMCP(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage mcp", "sage mcp [sandbox flags] [--session ID] [--policy policy.yaml] [--approve-all]")
	var f mcpFlags
	f.sandboxFlags.register(fs)
	f.toolFlags.register("MCP", fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q (sage mcp speaks MCP on stdin and stdout)", fs.Arg(0))
	}
	if err := f.toolFlags.check(); err != nil {
		return fail(env, exitUsage, err)
	}
	code, err := f.run(ctx, env)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return exitInterrupted
		}
		return fail(env, code, err)
	}
	return 0
}

func (f *mcpFlags) run(ctx context.Context, env *cliEnv) (int, error) {
	cfg, err := f.config()
	if err != nil {
		return exitUsage, err
	}
	obs, shutdown, err := observer(ctx)
	if err != nil {
		return exitSandboxError, err
	}
	defer shutdown()
	cfg.Observer = obs
	h, err := sandbox.New(ctx, cfg)
	if err != nil {
		return exitSandboxError, f.named(err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	f.toolFlags.checkpoints, f.toolFlags.checkpointTools = cfg.Local.Checkpoints, true
	tm, err := f.manager(h, obs, hostApprover{})
	if err != nil {
		return exitUsage, err
	}
	srv, err := mcpserver.New(tm, mcpserver.Options{Name: "sage", Version: buildVersion(), Files: h,
		Instructions: mcpInstructions(h), Logger: slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return exitSandboxError, err
	}
	fmt.Fprintf(env.stderr, "sage mcp: sandbox %s (%s), workspace %s; serving MCP on stdio\n", h.Type(), h.ID(), h.WorkspacePath())
	err = srv.Run(ctx, &mcpserver.StdioTransport{Reader: readCloser{env.stdin}, Writer: writeCloser{env.stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return exitSandboxError, err
	}
	return 0, nil
}

func mcpInstructions(h *sandbox.Sandbox) string {
	return fmt.Sprintf("These tools run in a sage %s sandbox whose workspace is %s: relative paths are inside it. "+
		"Commands are checked by a policy first; a denied or unapproved command is an error to respect, not to work around.",
		h.Type(), h.WorkspacePath())
}

// readCloser and writeCloser adapt the command's streams; closing them
// leaves the process's stdin and stdout to main.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
