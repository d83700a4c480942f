package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Files: every file operation takes a sandbox path (relative to the
// workspace, or absolute inside the sandbox) and goes through os.Root on
// the host, never through a shell. Errors are *fs.PathError values: a
// missing file is fs.ErrNotExist, a path outside the workspace and its
// mounts fs.ErrPermission. (docs/files.md shows this example.)
func ExampleSandbox_WriteFile() {
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

	if err := sb.EnsureDirectory(ctx, "src"); err != nil {
		log.Fatal(err)
	}
	// A write replaces the file atomically (temp file, fsync, rename).
	if err := sb.WriteFile(ctx, "src/main.py", []byte("print(6 * 7)\n"), sandbox.WriteOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "src/main.py", []byte("print('done')\n"), sandbox.WriteOptions{Append: true}); err != nil {
		log.Fatal(err)
	}
	data, err := sb.ReadFile(ctx, "/workspace/src/main.py") // the same file by its absolute sandbox path
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))

	entries, err := sb.ListDirectory(ctx, "src")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Path, e.Size, "bytes")
	}

	_, err = sb.ReadFile(ctx, "src/missing.py")
	fmt.Println("missing:", errors.Is(err, fs.ErrNotExist))
	err = sb.WriteFile(ctx, "/etc/cron.d/x", []byte("* * * * * root sh\n"), sandbox.WriteOptions{})
	fmt.Println("outside:", errors.Is(err, fs.ErrPermission))
	// Output:
	// print(6 * 7)
	// print('done')
	// /workspace/src/main.py 27 bytes
	// missing: true
	// outside: true
}
