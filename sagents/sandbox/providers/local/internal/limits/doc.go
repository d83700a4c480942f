// Package limits resolves and enforces the limits of a local-mode
// sandbox: the resolved Limits and their defaults (limits.go), the same
// limits as rlimits, prlimit(1) flags or a macOS ulimit script, the
// per-sandbox cgroups (v1 or v2) that hold the pids and memory limits for
// the whole sandbox (cgroup_linux.go), the host thread that sits in a v1
// set so bwrap is born in it (cgroup_thread_linux.go), the early move of a
// v2 or not-yet-joined start (cgroup_prime_linux.go), each command's CPU
// cgroup and its budget watchdog (cpubudget_linux.go), and how each limit
// holds (Enforced, Probe). It knows nothing of sandboxes or isolators:
// package local's gate (gate_linux.go) applies what this package computes.
package limits
