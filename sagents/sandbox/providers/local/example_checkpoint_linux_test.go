//go:build linux

package local_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local" // registers "local"
)

// Checkpoints: with checkpoints on, a session's workspace is layered, so
// a turn that broke it is undone in milliseconds, whatever its size, and a
// fork starts another sandbox from a checkpoint (files only: processes
// are not saved). (docs/checkpoints.md shows this example.)
func Example_checkpoints() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sage-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the sandbox's uid passes through to the workspaces
	os.Mkdir(filepath.Join(dir, "work"), 0o755)

	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: filepath.Join(dir, "work"), RuntimeDir: filepath.Join(dir, "run")}
	cfg.Local.Checkpoints = true
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	if err := sb.WriteFile(ctx, "notes.txt", []byte("the good state\n"), sandbox.WriteOptions{}); err != nil {
		log.Fatal(err)
	}
	cp, err := sb.Checkpoint(ctx) // sandbox.Checkpoint{ID, Time, Size, Layers, Covers: "files"}
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sb.ExecuteCommand(ctx, "rm -rf ./*", sandbox.ExecOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := sb.Rollback(ctx, cp.ID); err != nil {
		log.Fatal(err)
	}
	data, err := sb.ReadFile(ctx, "notes.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after the rollback: %s", data)

	fork, err := sb.Fork(ctx, cp.ID, filepath.Join(dir, "fork")) // a new *sandbox.Sandbox from that state
	if err != nil {
		log.Fatal(err)
	}
	defer fork.Close(ctx)
	res, err := fork.ExecuteCommand(ctx, "cat notes.txt", sandbox.ExecOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("in the fork: %s", res.Stdout)

	list, err := sb.Checkpoints(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(list), "checkpoint, covering", list[0].Covers)
	// Output:
	// after the rollback: the good state
	// in the fork: the good state
	// 1 checkpoint, covering files
}
