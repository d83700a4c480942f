// Package local registers the "local" sandbox mode, the default: a
// per-session workspace isolated with bubblewrap on Linux and Seatbelt
// (sandbox-exec) on macOS, with enforced limits.
//
// # Linux
//
// Every command runs as
//
//	[cgroup trampoline] bwrap <isolation args> -- prlimit <limits> -- /bin/sh -c CMD
//
// The bwrap argument list is built in one place (BwrapArgs), in this order:
// namespaces (--unshare-all, --unshare-user, --share-net only with network
// open, --disable-userns), --die-with-parent, --new-session, --clearenv and
// the allowlisted environment, --cap-drop ALL, read-only binds of the
// system directories that exist (symlinks such as /bin -> usr/bin are
// recreated), /etc read-only with its secrets (/etc/shadow, ...) masked,
// --proc /proc, --dev /dev, a private size-bounded /tmp, read-only binds of
// interpreters outside /usr, then the workspace read-write at its virtual
// path (default /workspace) and the volume mounts (read-only ones with
// --ro-bind). Mounts come after /tmp, so a workspace under /tmp stays
// visible. HOME is the workspace.
//
// Limits are applied inside the sandbox, before the user command, by
// prlimit(1) from util-linux: RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NPROC,
// RLIMIT_CORE=0 and, when no memory cgroup is available, RLIMIT_AS. In a
// user namespace RLIMIT_NPROC counts the sandbox's own processes, but the
// kernel never applies it to the host's root user; when running as root
// the pids limit (and the memory limit) use a per-sandbox cgroup instead
// (v1 or v2, where the cgroup tree is writable), joined by a one-line
// /bin/sh trampoline before bwrap starts. If a limit cannot be enforced,
// New fails and says why: nothing runs with a limit silently missing.
//
// There is no fallback to running unisolated. If bwrap is missing or
// cannot create namespaces, New fails with an error that
// errors.Is(err, sandbox.ErrIsolationUnavailable) and names the cause and
// the fix (sage doctor prints the same). Isolation "none" must be asked
// for explicitly and is logged as a warning.
//
// Timeouts kill the whole tree: SIGTERM goes to the processes inside the
// sandbox's session, then SIGKILL to bwrap, whose death takes down the pid
// namespace and everything in it.
//
// # macOS
//
// Commands run under /usr/bin/sandbox-exec with a Seatbelt profile
// generated from the config (SeatbeltProfile): deny by default, reads of
// system paths, writes only to the workspace, the session's tmp and
// read-write mounts, no network unless enabled. Limits use the shell's
// ulimit. macOS has no mount namespaces, so the workspace keeps its host
// path and mounts must use their host paths.
package local
