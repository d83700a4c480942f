// Command sage runs commands and code in sagents sandboxes and checks what
// the machine supports.
//
//	sage exec [sandbox flags] [--json] -- CMD [ARGS]
//	sage python [sandbox flags] [--json] (-c CODE | FILE)
//	sage fs read|write|ls|tree|rm [sandbox flags] PATH
//	sage agent [flags] "TASK"
//	sage mcp [sandbox flags] [--policy FILE] [--approve-all]
//	sage doctor [--json]
//	sage version (or sage --version)
//
// `sage help`, `sage --help`, `sage help CMD [SUB]` and `sage CMD [SUB]
// --help` print help on stdout and exit 0. A bad flag, argument or
// setting prints one line naming it, with a pointer to the help, and
// exits 2.
//
// Sandbox flags are shared: --mode, --workspace, --session, --timeout,
// --mount host:path[:ro] (repeatable), --env K=V (repeatable),
// --remote-provider and --remote-url, and local mode's limits. They
// override the SAGE_* environment variables. The default workspace is
// $SAGE_HOME/sessions/<session>/workspace, SAGE_HOME defaulting to ~/.sage.
//
// sage exec and sage python exit with the command's exit code, 124 when
// it timed out (saying so on stderr) and 125 when the sandbox could not
// run it (with a one-line reason on stderr). A single CMD argument is a
// shell command line; several are an argument vector, quoted for the
// shell. The first sage python of a session creates its venv, which takes
// seconds; it says so on stderr when it does.
//
// Flags are the standard library's flag package (newFlagSet, parseFlags
// and parseFlagsInterspersed in help.go add interspersed flags, "--",
// one-line errors that name what a value wants, and help spelled --name),
// not spf13/pflag: pflag reads -name as the shorthands -n -a -m -e, so
// the single-dash long forms sage takes (-help, -mode local, -json; the
// help tests assert -help) would change meaning, and since the Kubernetes
// provisioner moved to cmd/sage-provisioner, pflag (which client-go
// brought in) is no longer linked into sage at all.
package main
