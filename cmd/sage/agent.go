package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/tools"
)

func init() {
	register(command{"agent", "run a task with a tool-calling agent in the session's sandbox", runAgent})
}

// defaultTask is what --model scripted runs when no task is given.
const defaultTask = "Write a Python script that prints the first 15 Fibonacci numbers and their sum, run it, and tell me the output."

type agentFlags struct {
	sandboxFlags
	model, baseURL, fastModel string
	promptCache               string
	reprobe                   bool
	maxSteps                  int
	skills                    stringList
	trace                     bool
	tf                        toolFlags // --policy and --approve-all
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runAgent(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage agent", `sage agent [flags] "TASK"`)
	var af agentFlags
	af.register(fs)
	fs.StringVar(&af.model, "model", "", "model `name` (default $SAGE_MODEL); \"scripted\" plays a built-in replay, no model needed")
	fs.StringVar(&af.baseURL, "base-url", "", "OpenAI-compatible base `URL` (default $OPENAI_BASE_URL or https://api.openai.com/v1)")
	fs.StringVar(&af.promptCache, "prompt-cache", "", "prompt caching `mode`: auto, breakpoints, key or off (default $SAGE_PROMPT_CACHE or auto)")
	fs.BoolVar(&af.reprobe, "reprobe", false, "probe the model again before the run instead of starting from its cached capabilities (sage probe's cache, kept 24h under $SAGE_HOME)")
	fs.StringVar(&af.fastModel, "fast-model", "", "the fast model's `name` (default $SAGE_FAST_MODEL; none)")
	fs.IntVar(&af.maxSteps, "max-steps", agent.DefaultMaxSteps, "most model calls")
	fs.Var(&af.skills, "skills", "a skill `folder`, or a folder of skill folders (repeatable)")
	fs.StringVar(&af.tf.policy, "policy", "", "command policy YAML `file` (default: the built-in rules)")
	fs.BoolVar(&af.trace, "trace", true, "print the trace tree to stderr at the end")
	fs.BoolVar(&af.tf.undo, "undo", false, "give the model the undo tool, which rolls the workspace back to an earlier turn (needs --checkpoints; the policy's undo: true does it too)")
	fs.BoolVar(&af.tf.approveAll, "approve-all", false, "run commands the policy would ask about (ask rules); deny rules still apply")
	pos, code, stop := parseFlagsInterspersed(env, fs, args)
	if stop {
		return code
	}
	task := strings.Join(pos, " ")
	if af.model == "" {
		af.model = os.Getenv("SAGE_MODEL")
	}
	if af.model == "scripted" && task == "" {
		task = defaultTask
	}
	switch {
	case af.model == "":
		return usageError(env, fs.Name(), "no model: pass --model NAME or set SAGE_MODEL (or --model scripted for the built-in replay)")
	case task == "":
		return usageError(env, fs.Name(), "missing the task")
	}
	if af.promptCache != "" {
		if _, err := llm.ParsePromptCacheMode(af.promptCache); err != nil {
			return usageError(env, fs.Name(), "--prompt-cache: %v", err)
		}
	}
	if err := af.tf.check(); err != nil {
		return fail(env, exitUsage, err)
	}
	code, err := af.run(ctx, env, task)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return exitInterrupted
		}
		return fail(env, code, err)
	}
	return 0
}

func (af *agentFlags) run(ctx context.Context, env *cliEnv, task string) (_ int, runErr error) {
	var handlers []observability.Handler
	if af.trace {
		handlers = append(handlers, observability.NewConsoleHandler(env.stderr, observability.ConsoleOptions{}))
	}
	obs, shutdown, err := observer(ctx, handlers...)
	if err != nil {
		return exitSandboxError, err
	}
	defer shutdown()
	client, closeModel, err := af.client(obs, env)
	if err != nil {
		return exitUsage, llmNamed(err, af.fs)
	}
	defer closeModel()
	if af.reprobe {
		// Learn the model's capabilities again (and cache them); an
		// unreachable model ends the run here, with one error.
		rep, err := client.ProbeModel(ctx, llm.ProbeOptions{Refresh: true})
		if err != nil {
			return exitSandboxError, fmt.Errorf("--reprobe: %w", err)
		}
		fmt.Fprintf(env.stderr, "sage agent: probed %s at %s (%d probes; cached for 24h)\n", rep.Model, rep.BaseURL, len(rep.Probes))
	}

	cfg, err := af.config()
	if err != nil {
		return exitUsage, err
	}
	if cfg.Local.Checkpoints && cfg.Mode != sandbox.Local {
		return exitUsage, badSetting("--checkpoints (sandbox.local.checkpoints) needs local mode, not %s: the agent's turn checkpoints are local layers", cfg.Mode)
	}
	af.tf.checkpoints = cfg.Local.Checkpoints
	if af.tf.undo && !cfg.Local.Checkpoints {
		return exitUsage, badSetting("--undo needs checkpoints: add --checkpoints (or sandbox.local.checkpoints: on)")
	}
	// The run starts before the sandbox, so its acquire and release are
	// traced inside it (the agent's own run nests under this one).
	in := []observability.Message{{Role: "user", Content: task}}
	ctx = obs.ChainStart(ctx, observability.ChainInfo{SessionID: af.session, Name: "sage agent", Inputs: in})
	var answer string
	defer func() {
		if runErr != nil {
			obs.ChainError(ctx, runErr)
			return
		}
		obs.ChainEnd(ctx, observability.ChainResult{Outputs: []observability.Message{{Role: "assistant", Content: answer}}})
	}()
	cfg.Observer = obs
	h, err := sandbox.New(ctx, cfg)
	if err != nil {
		return exitSandboxError, af.named(err)
	}
	defer func() {
		if cerr := h.Close(context.WithoutCancel(ctx)); cerr != nil && runErr == nil {
			fmt.Fprintf(env.stderr, "sage agent: closing the sandbox: %v\n", cerr)
		}
	}()

	ag, err := af.agent(ctx, h, client, obs, env, cfg.Local.Checkpoints)
	if err != nil {
		return exitSandboxError, err
	}
	fmt.Fprintf(env.stderr, "sage agent: model %s, sandbox %s (%s), workspace %s\n", client.Model(llm.Standard), h.Type(), h.ID(), h.WorkspacePath())
	res, err := ag.Run(ctx, task)
	if err != nil {
		return 1, err
	}
	answer = res.Answer
	cached := ""
	if res.Usage.Cached > 0 {
		cached = fmt.Sprintf(" (%.0f%% of the input read from the provider's prompt cache)", res.Usage.CachedShare()*100)
	}
	fmt.Fprintf(env.stderr, "sage agent: %d steps, %d tool calls, %d input + %d output tokens%s\n",
		res.Steps, len(res.ToolCalls), res.Usage.Input, res.Usage.Output, cached)
	return 0, nil
}

// client builds the llm client; with --model scripted it starts the replay
// server and points the client at it.
func (af *agentFlags) client(obs *observability.Manager, env *cliEnv) (*llm.Client, func(), error) {
	baseURL := firstNonEmpty(af.baseURL, os.Getenv("OPENAI_BASE_URL"), "https://api.openai.com/v1")
	key := os.Getenv("OPENAI_API_KEY")
	model := af.model
	closeFn := func() {}
	if model == "scripted" {
		srv, err := replay.Start()
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(env.stderr, "sage agent: --model scripted: a built-in REPLAY of a fixed plan (no language model) at %s\n", srv.URL)
		baseURL, key, model, closeFn = srv.URL, "", replay.Model, func() { srv.Close() }
	}
	cfg := llm.Config{
		Standard:    llm.ModelConfig{BaseURL: baseURL, APIKey: key, Model: model},
		Fast:        llm.ModelConfig{Model: firstNonEmpty(af.fastModel, os.Getenv("SAGE_FAST_MODEL"))},
		Observer:    obs,
		Retry:       llm.RetryPolicy{MaxAttempts: 3},
		PromptCache: llm.PromptCacheMode(af.promptCache),
		// Start from what sage probe (or an earlier run) learned of the
		// model, when fresh; --reprobe drops it.
		ProbeCache: &llm.ProbeOptions{Refresh: af.reprobe},
	}
	if af.model == "scripted" {
		cfg.Fast.Model = ""
	}
	c, err := llm.New(cfg)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return c, closeFn, nil
}

func (af *agentFlags) agent(ctx context.Context, h *sandbox.Sandbox, client *llm.Client, obs *observability.Manager, env *cliEnv, checkpoints bool) (*agent.Agent, error) {
	tm, err := af.tf.manager(h, obs, nil)
	if err != nil {
		return nil, err
	}
	var skills *tools.SkillManager
	if len(af.skills) > 0 {
		var err error
		if skills, err = tools.LoadSkills(af.skills...); err != nil {
			return nil, err
		}
		if _, err := skills.Install(ctx, h); err != nil {
			return nil, err
		}
	}
	return agent.New(agent.Config{
		Client: client, Tools: tm, Observer: obs, Skills: skills,
		Name: "sage", SessionID: af.session, MaxSteps: af.maxSteps,
		Output: env.stdout, Log: env.stderr,
		Checkpoints: checkpoints,
	})
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// llmFields name the llm.Config fields the model flags set, with the
// flag and the variable that set each.
var llmFields = map[string]struct{ flag, env string }{
	"Standard.BaseURL": {"--base-url", "OPENAI_BASE_URL"},
	"Standard.Model":   {"--model", "SAGE_MODEL"},
	"Fast.Model":       {"--fast-model", "SAGE_FAST_MODEL"},
	"Fast.BaseURL":     {"--base-url", "OPENAI_BASE_URL"},
	"PromptCache":      {"--prompt-cache", llm.EnvPromptCache},
}

// llmNamed renames the field of an *llm.ConfigError in err to the flag
// the user gave (fs), else the variable that set it; the result is a bad
// setting (exit 2) either way.
func llmNamed(err error, fs *flag.FlagSet) error {
	var ce *llm.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	name := ce.Field
	if n, ok := llmFields[ce.Field]; ok {
		name = n.flag
		if _, set := os.LookupEnv(n.env); set && (fs == nil || !flagSet(fs, strings.TrimPrefix(n.flag, "--"))) {
			name = n.env
		}
	}
	return badSetting("%s: %s", name, ce.Reason)
}
