package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

// Exit codes shared by the subcommands (the table in docs/cli.md). A command
// run in a sandbox (exec, python) exits with its own code besides.
const (
	exitFailed       = 1   // the operation ran and failed: a file error, an unknown name, a failed check
	exitUsage        = 2   // a bad flag, argument or setting
	exitTimedOut     = 124 // the command's timeout expired
	exitSandboxError = 125 // the sandbox (or the server, daemon, Docker) could not run it
	exitInterrupted  = 130 // stopped by SIGINT; by SIGTERM 143 (128 + the signal, as a shell says)
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// subcommand is one of the words a command with subcommands takes first.
type subcommand struct{ name, summary string }

// entry is a registered command. When subs is set, the first argument
// must name one of them, and run gets the arguments from it on.
type entry struct {
	command
	subs []subcommand
}

// cliEnv carries the process's streams so tests can run commands in
// process too.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

var commands []entry

func register(c command, subs ...subcommand) { commands = append(commands, entry{c, subs}) }

func lookup(name string) (entry, bool) {
	i := slices.IndexFunc(commands, func(e entry) bool { return e.name == name })
	if i < 0 {
		return entry{}, false
	}
	return commands[i], true
}

func main() {
	absHome()
	ctx, stop := signalContext(context.Background())
	code := run(ctx, &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(exitAfterSignal(ctx, code))
}

// caughtSignal is the cause of a context signalContext ended.
type caughtSignal struct{ sig syscall.Signal }

func (c caughtSignal) Error() string { return "stopped by " + c.sig.String() }

// signalContext ends ctx on the first SIGINT or SIGTERM, with the signal
// as its cause; further ones are ignored while the command cleans up
// (its sandbox, container or daemon), which every command does within
// its grace (SIGKILL ends sage at once).
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(caughtSignal{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// exitAfterSignal is the exit code of a command that returned code: a
// command a signal stopped (code not 0: a server that shut down cleanly
// on SIGTERM exits 0) exits 128 + the signal, as a shell reports it.
func exitAfterSignal(ctx context.Context, code int) int {
	var c caughtSignal
	if code != 0 && errors.As(context.Cause(ctx), &c) {
		return 128 + int(c.sig)
	}
	return code
}

// absHome makes a relative SAGE_HOME absolute, once, for this process and
// the ones it starts (a session daemon runs in another directory).
func absHome() {
	if h := os.Getenv("SAGE_HOME"); h != "" && !filepath.IsAbs(h) {
		if abs, err := filepath.Abs(h); err == nil {
			os.Setenv("SAGE_HOME", abs)
		}
	}
}

func run(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		usage(env.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(env.stdout)
		return 0
	case "help":
		return runHelp(ctx, env, args[1:])
	case "-version", "--version":
		return runVersion(ctx, env, nil)
	}
	if strings.HasPrefix(args[0], "-") {
		name, _, _ := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		return usageError(env, "sage", "unknown flag --%s (flags go after the command)", name)
	}
	e, ok := lookup(args[0])
	if !ok {
		return usageError(env, "sage", "unknown command %q", args[0])
	}
	if e.subs != nil {
		return runSubcommand(ctx, env, e, args[1:])
	}
	return e.run(ctx, env, args[1:])
}

// runHelp implements `sage help [CMD [SUB]]` as `sage CMD [SUB] --help`.
func runHelp(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "help" || strings.HasPrefix(args[0], "-") {
		usage(env.stdout)
		return 0
	}
	e, ok := lookup(args[0])
	if !ok {
		return usageError(env, "sage help", "unknown command %q", args[0])
	}
	if e.subs != nil && len(args) > 1 {
		return run(ctx, env, []string{e.name, args[1], "--help"})
	}
	return run(ctx, env, []string{e.name, "--help"})
}

func runSubcommand(ctx context.Context, env *cliEnv, e entry, args []string) int {
	name := "sage " + e.name
	if len(args) == 0 {
		return usageError(env, name, "missing subcommand (%s)", subNames(e.subs))
	}
	switch args[0] {
	case "-h", "-help", "--help":
		subcommandUsage(env.stdout, e)
		return 0
	case "help":
		if len(args) == 1 {
			subcommandUsage(env.stdout, e)
			return 0
		}
		return runSubcommand(ctx, env, e, []string{args[1], "--help"})
	}
	if !slices.ContainsFunc(e.subs, func(s subcommand) bool { return s.name == args[0] }) {
		return usageError(env, name, "unknown subcommand %q (want %s)", args[0], subNames(e.subs))
	}
	return e.run(ctx, env, args)
}

func subNames(subs []subcommand) string {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sage <command> [flags] [args]\n\ncommands:")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sage help <command>' or 'sage <command> --help' for a command's flags;")
	fmt.Fprintln(w, "'sage --version' prints the version.")
}

func subcommandUsage(w io.Writer, e entry) {
	fmt.Fprintf(w, "usage: sage %s <subcommand> [flags] [args]\n\n%s\n\nsubcommands:\n", e.name, e.summary)
	width := 0
	for _, s := range e.subs {
		width = max(width, len(s.name))
	}
	for _, s := range e.subs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.summary)
	}
	fmt.Fprintf(w, "\nRun 'sage %s <subcommand> --help' for its flags.\n", e.name)
}

// usageError prints one line naming the bad input, with a pointer to the
// help of the command line name ("sage exec"), and returns exitUsage.
func usageError(env *cliEnv, name, format string, a ...any) int {
	fmt.Fprintf(env.stderr, "%s: %s; see '%s --help'\n", name, oneLine(fmt.Sprintf(format, a...)), name)
	return exitUsage
}

// fail prints a one-line error and returns code; a bad setting
// (*sandbox.ConfigError, *settingError) returns exitUsage whatever code
// says, so that bad flags and bad configuration share one exit code.
func fail(env *cliEnv, code int, err error) int {
	fmt.Fprintf(env.stderr, "sage: %v\n", oneLine(err.Error()))
	if badInput(err) {
		return exitUsage
	}
	return code
}

// badInput reports whether err is a bad flag, argument or setting: the
// sandbox's, the model client's, one a session's daemon found, or an
// argument too long for any sandbox.
func badInput(err error) bool {
	var ce *sandbox.ConfigError
	var le *llm.ConfigError
	var se *settingError
	return errors.As(err, &ce) || errors.As(err, &le) || errors.As(err, &se) ||
		errors.Is(err, sandbox.ErrTooLong) || errors.Is(err, sessiond.ErrConfig)
}

// printJSON writes v to stdout as indented JSON and returns the exit code.
func printJSON(env *cliEnv, v any) int {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

// settingError is a flag value or setting found wrong after parsing.
type settingError struct{ err error }

func (e *settingError) Error() string { return e.err.Error() }
func (e *settingError) Unwrap() error { return e.err }

func badSetting(format string, a ...any) error {
	return &settingError{fmt.Errorf(format, a...)}
}

func oneLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i] + " ..."
		}
	}
	return s
}
