package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("SANDBOX_EXAMPLE_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSandboxExample runs the program as a user does: a command's output
// comes back, and a failing command makes it exit non-zero.
func TestSandboxExample(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command(os.Args[0], args...) // TestMain runs main before any test flag is parsed
		cmd.Env = append(os.Environ(), "SANDBOX_EXAMPLE_RUN_MAIN=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err != nil || !strings.HasPrefix(out, "hello from /workspace") {
		t.Errorf("default command: err %v, output %q", err, out)
	}
	out, err = run("echo out; exit 3")
	if err == nil || !strings.Contains(out, "exit code 3") {
		t.Errorf("a failing command: err %v, output %q", err, out)
	}
}
