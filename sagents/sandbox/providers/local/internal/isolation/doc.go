// Package isolation holds the isolation backends of local mode: what
// turns one command (an Invocation) into the host process that runs it
// isolated (a Wrapped), behind the Backend interface that package local
// runs commands, background tasks and the session sandbox's init
// through. New returns the backend Options names:
//
//   - bwrap (Linux, the default; bwrap_linux.go): a bubblewrap sandbox
//     per command, its arguments (package internal/bwrapargs) through a
//     sealed memfd, the workspace bound from a descriptor opened without
//     symlinks, the seccomp filter; held at the gate (gate_linux.go)
//     between bwrap's namespace setup and the command's exec while the
//     host puts it into the sandbox's cgroups and sets its rlimits; no
//     descriptor of the caller's passes (fds_linux.go).
//   - gVisor (Linux; gvisor_linux.go, the OCI spec in gvisor_spec.go):
//     a runsc sandbox per command, inside the same host cgroups.
//   - none (Linux; none_linux.go): the host itself, under prlimit(1) and
//     the cgroups.
//   - Seatbelt or none (macOS; seatbelt_darwin.go): sandbox-exec with the
//     profile of package internal/seatbelt, the limits by ulimit.
//
// Options carry what a backend needs of its sandbox (workspace, mounts,
// network, limits, uid, umask, the egress proxies, whether a session
// sandbox runs), so no backend reaches into package local's Sandbox; this
// package never imports package local (internal/archtest's
// TestLocalRooms), and package local declares no backend of its own nor
// starts an isolation program (TestIsolationStaysInItsRoom). A session
// sandbox's init is an Invocation with Session set: its limits are its
// commands' (it sets them for each one) and, under gVisor, Caps are its
// capabilities and its control socket is GvisorControlFD. Where the
// session sandbox differs by backend (bwrap's per-command CPU cgroup,
// gVisor's rlimits) package local asserts the concrete *Bwrap or *Gvisor.
package isolation
