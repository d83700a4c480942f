// Command sage runs commands and code in sagents sandboxes and checks what
// the machine supports.
//
//	sage exec [sandbox flags] [--json] -- CMD [ARGS]
//	sage fs read|write|ls|tree|rm [sandbox flags] PATH
//	sage doctor [--json]
//	sage version
//
// Sandbox flags are shared: --mode, --workspace, --session, --timeout,
// --mount host:path[:ro] (repeatable) and --env K=V (repeatable). They
// override the SAGE_* environment variables. The default workspace is
// $SAGE_HOME/sessions/<session>/workspace, SAGE_HOME defaulting to ~/.sage.
//
// sage exec exits with the command's exit code, 124 when it timed out and
// 125 when the sandbox could not run it (with a one-line reason on
// stderr). A single CMD argument is a shell command line; several are an
// argument vector, quoted for the shell.
package main
