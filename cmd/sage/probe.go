package main

import (
	"context"
	"os"

	"github.com/sage-go/sage/sagents/llm"
)

func init() {
	register(command{"probe", "probe an OpenAI-compatible model's capabilities", runProbe})
}

func runProbe(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage probe", "sage probe [--base-url URL] [--model NAME] [--json] [--refresh]")
	baseURL := fs.String("base-url", os.Getenv("OPENAI_BASE_URL"), "API base URL (default $OPENAI_BASE_URL)")
	model := fs.String("model", os.Getenv("SAGE_MODEL"), "model name (default $SAGE_MODEL)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	refresh := fs.Bool("refresh", false, "ignore cached probe results")
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	switch {
	case *baseURL == "":
		return usageError(env, fs.Name(), "missing --base-url URL (or set OPENAI_BASE_URL)")
	case *model == "":
		return usageError(env, fs.Name(), "missing --model NAME (or set SAGE_MODEL)")
	}
	err := llm.RunProbeCommand(ctx, env.stdout, llm.ProbeCommandOptions{
		BaseURL: *baseURL, Model: *model, APIKey: os.Getenv("OPENAI_API_KEY"), JSON: *asJSON, Refresh: *refresh})
	if err != nil {
		// A bad URL is a bad setting (exit 2); a model that did not
		// answer is the probe's finding (exit 1).
		return fail(env, exitFailed, llmNamed(err, fs))
	}
	return 0
}
