package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

type pythonArgs struct {
	Code         string   `json:"code" jsonschema:"minLength=1" jsonschema_description:"Python 3 source to run, in the workspace."`
	Requirements []string `json:"requirements,omitempty" jsonschema_description:"pip requirement specifiers to install first, e.g. numpy==2.1."`
}

// PythonTool returns execute_python.
func PythonTool() Tool {
	return NewFunc("execute_python", "Run Python 3 code in the sandbox (working directory: the workspace) and return its exit code, stdout and stderr.", executePython)
}

func executePython(ctx context.Context, h Sandbox, a pythonArgs) (Result, error) {
	res, err := h.ExecutePython(ctx, a.Code, sandbox.PythonOptions{Requirements: a.Requirements})
	if err != nil {
		return Result{}, err
	}
	return Result{Text: renderCommand(res)}, nil
}

// renderCommand renders a finished command for the model.
func renderCommand(r *sandbox.CommandResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d\n", r.ExitCode)
	if r.TimedOut {
		fmt.Fprintf(&b, "timed_out: true (after %s; the output is what it printed until then)\n", r.Duration.Round(1e6))
	}
	if r.Signal != "" {
		fmt.Fprintf(&b, "signal: %s\n", r.Signal)
	}
	if r.Truncated {
		fmt.Fprintf(&b, "truncated: %d stdout and %d stderr bytes dropped from the middle\n", r.StdoutDroppedBytes, r.StderrDroppedBytes)
	}
	section(&b, "stdout", r.Stdout)
	section(&b, "stderr", r.Stderr)
	return b.String()
}

func section(b *strings.Builder, name, text string) {
	if text == "" {
		fmt.Fprintf(b, "%s: (empty)\n", name)
		return
	}
	fmt.Fprintf(b, "%s:\n%s", name, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
}
