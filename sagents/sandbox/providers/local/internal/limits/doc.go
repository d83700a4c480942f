// Package limits resolves and enforces the limits of a local-mode
// sandbox: the resolved Limits and their defaults (limits.go), the same
// limits as rlimits, prlimit(1) flags or a macOS ulimit script, the
// per-sandbox cgroups (v1 or v2) that hold the pids and memory limits for
// the whole sandbox (cgroup_linux.go), the host thread that sits in a v1
// set so bwrap is born in it (cgroup_thread_linux.go), the early move of a
// v2 or not-yet-joined start (cgroup_prime_linux.go), each command's CPU
// cgroup and its budget watchdog (cpubudget_linux.go), and how each limit
// holds (Enforced, Probe). It knows nothing of sandboxes or isolation
// backends: the gate of package internal/isolation (gate_linux.go)
// applies what this package computes.
//
// The cgroup code is hand-written rather than containerd/cgroups/v3: that
// library is not a dependency and would bring cilium/ebpf, coreos/go-systemd
// and godbus into bin/sage for writing about ten files, and what this code
// does around the writes is not what it offers: cgroup v1 pids, memory and
// cpuacct beside v2, a host thread moved into the cgroups that forks bwrap
// (tasks or cgroup.threads, with the move's lock primed) so that commands
// are born inside, owner-tagged names (o<pid>_<start>_<pidns>) and the sweep
// of cgroups left by killed sage processes, the /bin/sh trampoline join of
// isolation none, and one-line errors naming the fix (systemd-run ...
// Delegate=yes).
package limits
