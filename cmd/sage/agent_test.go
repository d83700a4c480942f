package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func TestAgentScripted(t *testing.T) {
	t.Setenv("SAGE_HOME", sandboxtest.TempDir(t))
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	ws := sandboxtest.TempDir(t)
	var out, errb bytes.Buffer
	code := runWithin(t, 2*time.Minute, &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb},
		[]string{"agent", "--model", "scripted", "--mode", "passthrough", "--workspace", ws, "--session", "t1"}...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"[replay]", "sum: 986"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	for _, want := range []string{"REPLAY", "invoke_workflow sage", "execute_tool file_write", "chat sage-replay", "4 steps, 4 tool calls"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "fib_output.txt")); err != nil || !strings.Contains(string(b), "986") {
		t.Errorf("fib_output.txt: %q, %v", b, err)
	}
}

func TestAgentNeedsAModel(t *testing.T) {
	t.Setenv("SAGE_MODEL", "")
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, []string{"agent", "do something"})
	if code != exitUsage || !strings.Contains(errb.String(), "--model scripted") {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
}

// An unreachable model, probed up front with --reprobe, ends the run with
// one error line, before any sandbox work.
func TestAgentReprobeUnreachableModel(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "agent", "--mode", "passthrough", "--reprobe",
		"--base-url", "http://127.0.0.1:1/v1", "--model", "x", "hi")
	assert.NotEqual(t, 0, r.code)
	assert.Equal(t, 1, strings.Count(r.stderr, "connection refused"), r.stderr)
	assert.Contains(t, r.stderr, "sage: --reprobe: ")
	assert.NotContains(t, r.stderr, "invoke_agent", "no run after the failed probe")
}
