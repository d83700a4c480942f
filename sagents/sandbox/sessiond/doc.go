// Package sessiond keeps a local session sandbox alive between command
// lines: `sage exec --session S` run twice from a shell reaches the same
// sandbox (/tmp, processes and localhost persist) through a small daemon.
//
// The daemon is the linking program re-executed in its own session and
// process group, its stdio to a log. It owns one *sandbox.Sandbox (local
// mode with the session sandbox on) and serves it on a unix socket in
// the session's daemon directory, $SAGE_HOME/sessions/S/daemon (0700):
//
//	sock   the socket (0600); every connection's peer is checked: only
//	       the daemon's own uid, or root, in the daemon's own user and
//	       mount namespaces (no sandboxed process is) is served
//	key    the daemon's key (0600), new at each start: a request must
//	       carry it (Call, Run and Stop read it), so a peer of the
//	       daemon's uid that reached the socket without reading this
//	       directory (a sandbox with a mount over it) is refused; local
//	       mode keeps SAGE_HOME out of every sandbox
//	info   the daemon's pid, start time and settings (JSON)
//	lock   flock(2)ed by whoever starts or ends a daemon
//	log    the daemon's stdout and stderr
//
// A client (Ensure) dials the socket; when nothing answers it takes the
// lock, and either finds a daemon that is ending (it waits), one that
// died (a stale socket and a dead pid: it says so on stderr and cleans up)
// or none, and starts one. Two clients started at the same moment end up
// in one daemon.
//
// The protocol is framed (frame.go): a one-byte kind, a four-byte
// length and a payload whose size is capped per kind. A connection
// carries one request (JSON), then for exec and python the command's
// stdin, for an fs write the file's bytes (256 MiB at most), as data
// frames; the daemon answers with the command's stdout and stderr (an fs
// read: the file) as data frames as they come, then one JSON response.
// Closing the connection cancels the command. A request carries the
// protocol version; a daemon of another version refuses it with a
// message naming both and the fix (stop the session). A failure is an
// *Error whose kind errors.Is matches (ErrSettings, fs.ErrNotExist,
// sandbox.ErrEscape, ...); a file operation's *fs.PathError comes back
// as one, with the same text.
//
// Server.Observer gets one chain run per request ("sage exec", "sage
// python", "sage fs read", ...) holding the sandbox's events of that
// request, and "sage session stop" around the sandbox's release.
//
// The daemon ends on Stop, after IdleTimeout without a request (0 means
// never), on SIGTERM, or within a second of its directory being removed
// or replaced (rm -rf of SAGE_HOME: clients could not find it any more);
// it then closes the sandbox (every process of the session dies, its
// cgroups and mounts go), removes the socket, the key, the info and the
// lock file (through the directory it opened: never another daemon's at
// the same path), and keeps the workspace and the log. A library that opens a Sandbox itself
// does not use this package: its session dies with its process.
//
// Its API is what `sage` builds its session commands from: the client
// (Ensure, Run, Call, Stop, Describe, Serving; StartOptions, Streams), the
// messages (Request and its Op and FS constants, Response, Info, MaxRequest),
// the daemon (Server, ReadyFile, NotReady), the session's names and
// settings (CheckName, Dir, Fingerprint, SettingsDiff) and the errors
// (*Error and its sentinels). The frames, their caps and the protocol
// version are the package's own.
package sessiond
