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
// The bwrap argument list is built in one place (BwrapArgs, package
// internal/bwrapargs), in this order:
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
// Limits hold for the whole command, not per process, where a cgroup
// allows it. The memory cgroup counts every process of the sandbox,
// shared memory (memfd, /dev/shm, /tmp) included. The CPU time limit is a
// budget of each command (a foreground command or a background task):
// the command gets its own CPU-accounting cgroup (v1 cpuacct, or a child
// of the sandbox's v2 cgroup read through cpu.stat), which the gate puts
// the sandbox's init into, and a watchdog reads its usage every 50 ms and
// kills every process in it with SIGKILL once the budget is used (no
// grace period: it would burn more CPU). The result then says
// CPUTimeExceeded, exit code 152 and signal SIGXCPU. RLIMIT_CPU stays
// as a per-process backstop one second above the budget (it counts whole
// clock ticks, so would otherwise beat the exact count of the cgroup on a
// busy host and end the command for less). The command's cgroup is
// removed when the command ends, however it ends; Close removes the
// sandbox's.
//
// Where no writable cgroup exists (an ordinary user without a delegated
// cgroup), the default memory limit falls back to RLIMIT_AS, which each
// process gets anew and which does not count shared memory; a CPU time
// limit, or a memory limit the config sets itself, is refused at New
// with the fix (-1, or a writable cgroup). Every CommandResult carries
// LimitsEnforced, saying for each limit "cgroup", "userns" (RLIMIT_NPROC
// counted per user namespace), "rlimit-per-user", "rlimit-per-process"
// or "none"; Sandbox.LimitsEnforced and sage doctor say the same.
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
// # Network
//
// Network is off by default: the sandbox has its own network namespace
// with nothing but loopback. "open" shares the host's network (--share-net)
// and says so in the logs. "allowlist" keeps the empty namespace; New
// starts an HTTP/CONNECT proxy and a SOCKS5 proxy (package egress) in the
// host process, one pair per sandbox, listening on Unix sockets in a
// private directory (runtime dir, or the temporary directory when the
// path would be too long for a socket), and Close stops them. Each
// command runs as
//
//	bwrap ... --ro-bind SOCKDIR /run/sage/net --ro-bind EXE /run/sage/bin/sage-netbridge \
//	    -- /run/sage/bin/sage-netbridge --forward 3128=/run/sage/net/http.sock \
//	       --forward 1080=/run/sage/net/socks.sock [--as BYTES] -- /bin/sh -c CMD
//
// where EXE is this very program (package netbridge: any binary linking
// local mode serves as the bridge when started under that name). The
// bridge binds 127.0.0.1:3128 and :1080 inside, forwards them to the
// sockets, then starts the command and exits with its status, so the
// proxies are up before the command starts and nothing outlives it.
// HTTP_PROXY, HTTPS_PROXY (http://127.0.0.1:3128), ALL_PROXY
// (socks5h://127.0.0.1:1080), NO_PROXY (localhost,127.0.0.1,::1) and their
// lower-case forms are set. A program that ignores them has no route
// anywhere: the design fails closed. The proxies resolve names
// themselves, check deny rules then allow rules, refuse special addresses
// (loopback, private, link-local, cloud metadata) unless an allow rule
// names the address, dial exactly the address they checked, answer a
// refusal with 403 and X-Sage-Blocked, and report every decision to
// Options.EgressObserver (slog by default).
//
// The bridge is a Go program and needs more address space than a small
// RLIMIT_AS allows, so in allowlist mode the gate leaves RLIMIT_AS out
// and the bridge sets it on the command (ulimit -v, before exec); the
// other limits cover the bridge too: its threads count towards
// RLIMIT_NPROC and its CPU time towards RLIMIT_CPU. Isolation none has no
// namespace to keep empty, so allowlist with it is a config error.
//
// # Session sandbox
//
// By default on Linux with bwrap or gVisor (sandbox.local.fresh_per_command
// unset or false, or Options.Session), shell commands, background tasks and
// Python and JavaScript calls run in one long-lived bwrap per Sandbox
// whose command is the
// supervisor (package supervisor), bound read-only at
// /run/sage/bin/sage-supervisor (a copy in the runtime directory when the
// session's uid cannot reach it, as for the network bridge): the program
// SessionOptions.Supervisor names, else a sage-supervisor next to this
// program's executable (cmd/sage-supervisor, which make build puts next
// to bin/sage), else this program re-executed under that name. The
// separate program links the supervisor alone, so it starts in a
// fraction of the time. The supervisor is told the host's
// supervisor.Protocol (--protocol) and refuses to serve another; the
// first session of a separate program in a process also waits for its
// "pong" to carry that version (session_supervisor_linux.go). A refused
// program found next to the executable is bypassed (logged once; this
// program serves); a named one fails the command with an error naming it.
// bwrap starts through the same gate as any command (cgroups, rlimits;
// the CPU budget is left out: it is each command's). Each command is sent
// over an unnamed SOCK_SEQPACKET pair with its stdin, stdout and stderr
// pipes as SCM_RIGHTS; output flows from the command to this process
// directly. With a CPU limit the command is held before its first
// instruction until this process moved it (its host pid read from a pidfd
// the supervisor sends) into its own CPU cgroup. The supervisor is the
// sandbox's pid 1 (bwrap --as-pid-1; bwrap's stdio, and so the
// supervisor's, is a pipe this process copies to session.log:
// session_log_linux.go), and each command runs in a Landlock domain of
// its own where the kernel scopes signals (supervisor/domain_linux.go;
// under gVisor, a group tag: supervisor/tag_linux.go): no command can
// trace the supervisor or another command, nor signal the supervisor or
// pid 1, and a timeout or cancel ends every process of the command,
// wherever it moved. A command signals other commands' and background
// tasks' processes (kill, pkill, kill -1) through the supervisor, which
// answers its signal calls as seccomp user notifications
// (supervisor/signals_linux.go, docs/session-signals.md). If the
// supervisor does not report the end of a command told to end within
// sessionUnresponsiveGrace of its SIGKILL, this process kills the whole
// session sandbox itself (session_conn_linux.go). The session stops when idle
// (SessionOptions.IdleTimeout), on Close, or with this process (bwrap's
// parent-death signal); a dead or idle session is replaced on the next
// command and the result says SessionRestarted. A background task's
// stdout and stderr are its log file, passed to the supervisor; its host
// pid (from a pidfd) is what KillBackground signals. The session's binds
// are fixed at its start: the venv directory (so a venv made later is
// seen) and the code directory always; a call needing another bind
// restarts the session with it. fresh_per_command: true keeps a fresh
// sandbox per command. With isolation gvisor the session sandbox is one
// runsc sandbox whose init is the same supervisor (session_gvisor_linux.go:
// the control socket donated with runsc run --pass-fd, no pidfds, the CPU
// budget and address-space limit as each command's rlimits inside gVisor).
//
// A session's first command pays the sandbox's start: bwrap and its
// mounts, the supervisor's start (the Go runtime of the supervisor
// program), then the command. On cgroup v1 bwrap is forked from a host
// thread that joined the sandbox's cgroups when it opened
// (internal/limits/cgroup_thread_linux.go), so bwrap is born in them and the gate moves
// nothing: a move waits for an RCU grace period (2-16 ms here). Where
// that thread is not in yet (or on cgroup v2) the gate moves bwrap's
// child while bwrap mounts (bwrap reads its block descriptor after its
// mounts, before it forks the command), the move primed when the sandbox
// starts (internal/limits/cgroup_prime_linux.go). The supervisor sets the umask itself
// (--umask; no shell runs before it), reads requests in a small binary
// encoding (no reflection on the first command's way) and forks with
// syscall.ForkExec. SessionOptions.Prestart starts the session sandbox
// in the background when the Sandbox opens, so the first command finds
// it running.
//
// A sandbox's runtime directory holds its venv, background logs and, with
// checkpoints, its layers. A named sandbox's (driver.Config.SandboxID)
// or one the config gives (RuntimeDir) outlives its process, checkpoints
// included. An anonymous sandbox's own, SAGE_HOME/runtime/local-ID (a
// fork's among them: the core's Sandbox.Fork opens forks anonymous),
// goes at Close; beside it lies local-ID.lock, which the process holds
// locked (flock) from before the directory exists until after its
// removal. The layers a sandbox frees while live forks stand on them,
// set aside beside its runtime directory (.sage-forklayer-TOKEN-HEX,
// TOKEN the process's), have one such lock per directory
// (.sage-forklayer-TOKEN.lock), and the fork pool's sandboxes theirs
// (spare-ID.lock). A process killed with -9 leaves
// them all; the first sandbox a later process opens in that SAGE_HOME
// removes those whose lock is free (sweep_linux.go), and never a named
// sandbox's directory. The mounts such a process left on them (an
// idmapped workspace's, in its runtime directory) are detached first: a
// removal never goes through one into the workspace.
//
// # macOS
//
// Commands run under /usr/bin/sandbox-exec with a Seatbelt profile
// generated from the config (SeatbeltProfile, package internal/seatbelt): deny by default, reads of
// system paths, writes only to the workspace, the session's tmp and
// read-write mounts, no network unless enabled. With allowlist the
// proxies listen on 127.0.0.1 TCP ports instead (no network namespaces,
// so no bridge) and the profile allows outbound TCP to those two
// localhost ports only. Limits use the shell's
// ulimit. macOS has no mount namespaces, so the workspace keeps its host
// path and mounts must use their host paths.
//
// # Rooms
//
// The package itself is the mode: New and Sandbox (local.go), the
// wiring of its isolation backend (backend.go), the commands (exec.go),
// the session sandbox (session*.go), checkpoints (checkpoint*.go),
// Python and JavaScript (python.go), the egress proxies' setup
// (egress*.go), how the limits held for each command and background task
// (enforced.go) and sage doctor's reports (report_*.go). Each other concern has a room of its
// own, which never imports this package and imports another room only
// where internal/archtest's TestLocalRooms declares it:
//
//   - internal/isolation: the isolation backends that start every
//     command, behind its Backend interface and Options: bwrap with the
//     gate and the inherited descriptors, gVisor, isolation none, and
//     Seatbelt on macOS.
//   - internal/limits: the resolved limits, their rlimits (prlimit(1)
//     flags, a macOS ulimit script), the per-sandbox cgroups, the cgroup
//     thread, each command's CPU cgroup and budget watchdog, and how each
//     limit holds (Enforced, and Probe behind ProbeLimits).
//   - internal/quota: the workspace's disk quota, a loop-mounted image.
//   - internal/uids: the uid each workspace runs as, its registry, the
//     idmapped mount of a folder of another owner, and the reachability
//     and ownership checks of the paths bwrap binds as that uid.
//   - internal/bwrapargs: the bwrap argument list, a pure function.
//   - internal/seatbelt: the Seatbelt profile, plain text generation.
//   - internal/layers and internal/memfd: a session's checkpoint layers
//     and sealed memfds.
//   - egress, netbridge, seccomp, supervisor: the network proxies (whose
//     Event and Observer this package re-exports), the in-sandbox network
//     bridge, the seccomp filter, and the session supervisor (which
//     cmd/sage-supervisor links alone).
//
// The names of the rooms that are package local's API (Limits,
// ResolveLimits, BwrapArgs, SeatbeltProfile, GvisorSpec, SandboxPath,
// ...) are aliases and thin wrappers here (limits.go, rooms.go,
// backend_linux.go).
package local
