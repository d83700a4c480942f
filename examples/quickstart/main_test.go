package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/agent/replay"
)

// TestMain runs main itself when the test re-executes its binary as the
// program (the environment says so), so the test runs the README's
// program as a user does: a process of its own, with its exit code.
func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestQuickstart runs the README's agent against the replay model: the
// answer comes back on stdout, and the console trace on stderr has the
// agent run, its model calls and its tool calls.
func TestQuickstart(t *testing.T) {
	model, err := replay.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUICKSTART_RUN_MAIN=1", "OPENAI_BASE_URL="+model.URL, "SAGE_MODEL="+replay.Model, "OPENAI_API_KEY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("quickstart: %v\nstderr:\n%s", err, stderr.String())
	}
	if want := "first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	for _, want := range []string{"invoke_agent sage", "chat sage-replay", "execute_tool file_write", "execute_tool execute_shell_command"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the console trace lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestQuickstartWithoutModel: with no model configured the program stops
// with sage's error naming the fix, not a panic or a hang.
func TestQuickstartWithoutModel(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUICKSTART_RUN_MAIN=1", "OPENAI_BASE_URL=", "SAGE_MODEL=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("quickstart without a model succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "Options.Model") {
		t.Errorf("the error does not name Options.Model:\n%s", out)
	}
}
