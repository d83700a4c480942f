// Package netbridge is the in-sandbox half of local mode's network
// allowlist. A sandbox with network allowlist has its own, empty network
// namespace; the filtering proxies run on the host and are reachable only
// through Unix sockets bound into the sandbox. The bridge listens on
// loopback ports inside the namespace and forwards each connection to its
// socket, so that HTTP_PROXY=http://127.0.0.1:3128 works for every
// program.
//
// The bridge is not a separate binary: any program that links local mode
// (it imports this package) can serve. Local mode binds its own
// executable read-only into the sandbox under the name Name and runs
//
//	sage-netbridge --forward 3128=/run/sage/net/http.sock \
//	    --forward 1080=/run/sage/net/socks.sock [--as BYTES] -- CMD ARGS...
//
// This package's init sees argv[0] named Name, runs Main and exits
// before the host program's main starts. Main binds every listener first
// and only then starts the command as its child, so the proxies are
// ready before the command's first instruction; it relays the command's
// exit status (a signal N as 128+N, as bwrap does) and ends with it,
// which ends the sandbox. It never outlives the command, and the
// sandbox's pid namespace never outlives it.
//
// Go needs far more address space than a small RLIMIT_AS allows, so when
// memory is bounded by RLIMIT_AS (no memory cgroup), local mode does not
// put that limit on the sandbox as a whole; --as makes the bridge set it
// on the command instead, with the shell's ulimit -v before exec.
package netbridge
