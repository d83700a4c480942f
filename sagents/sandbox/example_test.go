package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local" // registers "local"
)

// A local sandbox (bubblewrap on Linux, Seatbelt on macOS): write a file
// into the workspace, run a command on it, and see a path outside the
// workspace refused.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sage-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Local, Workspace: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	if err := sb.WriteFile(ctx, "hello.py", []byte("print('hello from', __name__)\n"), sandbox.WriteOptions{}); err != nil {
		log.Fatal(err)
	}
	res, err := sb.ExecuteCommand(ctx, "python3 hello.py", sandbox.ExecOptions{Timeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)

	_, err = sb.ReadFile(ctx, "../../etc/passwd")
	fmt.Println("outside the workspace is refused:", errors.Is(err, fs.ErrPermission))
	// Output:
	// exit 0: hello from __main__
	// outside the workspace is refused: true
}
