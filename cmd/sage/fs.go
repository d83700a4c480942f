package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sage-go/sage/internal/termsafe"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

func init() {
	register(command{"fs", "read, write, list, tree or remove files in the session's sandbox", runFS},
		subcommand{"read", "print a file"}, subcommand{"write", "write stdin to a file"},
		subcommand{"ls", "list a directory"}, subcommand{"tree", "print a directory tree"},
		subcommand{"rm", "remove a file or directory"})
}

func runFS(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "usage: sage fs read|write|ls|tree|rm [flags] PATH")
		return exitUsage
	}
	op := args[0]
	fs := newFlagSet("sage fs "+op, "sage fs "+op+" [flags] PATH")
	var sf sandboxFlags
	sf.register(fs)
	// Each operation lists the flags it takes.
	asJSON, appendMode, hidden := new(bool), new(bool), new(bool)
	depth, items, maxEntries := new(int), new(int), new(int)
	*depth, *items, *maxEntries = 3, 100, sandbox.DefaultMaxEntries
	switch op {
	case "write":
		fs.BoolVar(appendMode, "append", false, "append instead of replacing")
	case "ls", "tree":
		fs.BoolVar(asJSON, "json", false, "print JSON")
		fs.IntVar(maxEntries, "max-entries", sandbox.DefaultMaxEntries, "entries read at most; the output says when it stopped there")
	}
	if op == "tree" {
		fs.IntVar(depth, "depth", 3, "maximum depth")
		fs.IntVar(items, "max-items", 100, "maximum entries per directory")
		fs.BoolVar(hidden, "hidden", false, "include dot files")
	}
	var df daemonFlags
	df.registerIdle(fs)
	pos, code, stop := parseFlagsInterspersed(env, fs, args[1:])
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(env, fs.Name(), "want one PATH, got %d arguments", len(pos))
	}
	if *maxEntries <= 0 {
		return usageError(env, fs.Name(), "--max-entries %d: want a positive number", *maxEntries)
	}
	switch op {
	case "read", "write", "ls", "tree", "rm":
	default:
		fmt.Fprintf(env.stderr, "sage fs: unknown operation %q (want read, write, ls, tree or rm)\n", op)
		return exitUsage
	}
	cfg, err := sf.config()
	if err != nil {
		return fail(env, exitSandboxError, err) // a bad setting is exitUsage (fail)
	}
	treeOpts := sandbox.TreeOptions{MaxDepth: *depth, MaxItems: *items, Hidden: *hidden, MaxEntries: *maxEntries}
	if usesDaemon(sessionFlagGiven(fs), cfg) {
		req := sessiond.FSRequest{Op: op, Path: pos[0], Append: *appendMode, MaxEntries: *maxEntries, Tree: treeOpts}
		return fsInDaemon(ctx, env, sf.session, cfg, df.idle, req, *asJSON)
	}
	if df.idle.set {
		return usageError(env, fs.Name(), "--idle-timeout needs --session S in local mode on Linux (a session daemon)")
	}
	ctx, h, end, err := openTraced(ctx, fs.Name(), sf.session, cfg)
	if err != nil {
		return fail(env, exitSandboxError, sf.named(err))
	}
	defer end(nil) // a file error is the answer, not a failure of the run
	p := pos[0]
	switch op {
	case "read":
		var data []byte
		if data, err = h.ReadFile(ctx, p); err == nil {
			_, err = env.stdout.Write(data)
		}
	case "write":
		var data []byte
		if data, err = io.ReadAll(env.stdin); err == nil {
			err = h.WriteFile(ctx, p, data, sandbox.WriteOptions{Append: *appendMode})
		}
	case "ls":
		var list []sandbox.FileInfo
		var truncated bool
		if list, truncated, err = h.ListDirectoryLimit(ctx, p, *maxEntries); err == nil {
			err = printListing(env, list, truncated, *asJSON)
		}
	case "tree":
		var tree *sandbox.TreeNode
		if tree, err = h.FileTree(ctx, p, treeOpts); err == nil {
			err = printTree(env.stdout, tree, *asJSON)
		}
	case "rm":
		err = h.DeleteFile(ctx, p)
	}
	if err != nil {
		// Errors may quote names made inside the sandbox.
		return fail(env, 1, escapedError{err})
	}
	return 0
}

// escapedError shows an error with control characters escaped
// (termsafe.Text).
type escapedError struct{ err error }

func (e escapedError) Error() string { return termsafe.Text(e.err.Error()) }
func (e escapedError) Unwrap() error { return e.err }

// printListing prints ls's answer, and says on stderr when it stopped at
// --max-entries.
func printListing(env *cliEnv, list []sandbox.FileInfo, truncated, asJSON bool) error {
	err := printList(env.stdout, list, asJSON)
	if err == nil && truncated {
		fmt.Fprintf(env.stderr, "sage fs ls: truncated: listed %d entries (the --max-entries limit); the directory holds more\n", len(list))
	}
	return err
}

// printList prints one entry a line; names are quoted as ls quotes them
// (termsafe.Name), so names made inside the sandbox cannot send escape
// sequences to the terminal.
func printList(w io.Writer, list []sandbox.FileInfo, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, fi := range list {
		name := termsafe.Name(fi.Name)
		if fi.IsDir {
			name += "/"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", termsafe.Text(fi.Mode), fi.Size, fi.ModTime.Format("2006-01-02 15:04"), name)
	}
	return tw.Flush()
}

func printTree(w io.Writer, tree *sandbox.TreeNode, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(tree)
	}
	_, err := io.WriteString(w, tree.String())
	return err
}
