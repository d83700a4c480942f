// Package supervisor is the in-sandbox half of local mode's session
// sandbox: one long-lived bwrap per session whose command is this
// supervisor, which forks every command of the session inside it.
//
// The supervisor is cmd/sage-supervisor (this package alone, a small
// program that starts fast), or any program that links local mode: local
// mode binds the program read-only into the sandbox under the name Name
// (which makes a program linking this package serve, from this package's
// init) and runs it as the sandbox's command with one end of a
// SOCK_SEQPACKET socket pair as descriptor --fd and its Protocol as
// --protocol (a supervisor of another version refuses to serve; every
// "pong" carries the version too). That socket
// is the whole control channel: it has no name in any file system or
// abstract namespace, the supervisor marks it close-on-exec and makes
// itself non-dumpable (no /proc/PID/fd, no ptrace from the commands, which
// hold no capabilities), so nothing running inside can reach or forge it.
//
// Each request is one message (Request, in the small binary encoding of
// its MarshalBinary: no reflection on the way of a session's first
// command; not protowire, which would bring fmt and protobuf's detrand,
// whose init reads this program's own executable at every start, into a
// standard-library-only program on the path of every session's first
// command: the format is one tag byte, the field number, and
// encoding/binary varints; sage and its supervisor are one build and
// Protocol is checked, so no deployed peer speaks another), optionally carrying the command's stdin, stdout and stderr
// as SCM_RIGHTS descriptors made by the host: output flows from the
// command to the host directly, never through the supervisor. The
// supervisor starts each command in its own process group and answers
// with Reply messages: "started" with its pid, then "exited" with its
// status. Each command also runs in a Landlock domain of its own
// (domain_linux.go; under gVisor, which has no Landlock, its processes
// carry a group tag of its own: tag_linux.go), so that no command can
// signal or trace the supervisor or another command (signals to another
// command's processes it then relays, refusing itself and pid 1:
// signals_linux.go), and so that a
// "signal" request that ends a command (SIGTERM, SIGKILL) reaches every
// process it started, wherever it moved; any other signal goes to its
// process group. Nothing else is ever signalled. When the host end
// closes, the supervisor kills every command it started and exits, which
// ends the sandbox (it is the sandbox's pid 1 under bwrap: its pid
// namespace takes the rest down).
package supervisor
