// Command sandbox runs one command in a local-mode sandbox (bubblewrap on
// Linux, Seatbelt on macOS) and prints its output: the sandbox core and
// the local mode alone, with no model, tools or tracing linked in.
//
//	go run ./examples/sandbox 'uname -a; ls -la'
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local" // registers "local"
)

func main() {
	if err := run(strings.Join(os.Args[1:], " ")); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox example:", err)
		os.Exit(1)
	}
}

func run(command string) error {
	if command == "" {
		command = "echo hello from $(pwd)"
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sage-sandbox-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Local, Workspace: dir})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	res, err := sb.ExecuteCommand(ctx, command, sandbox.ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	fmt.Print(res.Stdout)
	fmt.Fprint(os.Stderr, res.Stderr)
	if !res.Success {
		return fmt.Errorf("exit code %d", res.ExitCode)
	}
	return nil
}
