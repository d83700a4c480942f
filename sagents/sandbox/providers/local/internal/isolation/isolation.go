package isolation

import (
	"io/fs"
	"os"
	"os/exec"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// Backend turns an invocation into the host process that runs it
// isolated. New returns the one the options name; package local runs
// what Wrap returns (a command, a background task, or a session
// sandbox's init) and calls Close once.
type Backend interface {
	// VirtualWorkspace is where the workspace appears inside: the host
	// path where there is no mount namespace of the sandbox's own.
	VirtualWorkspace() string
	// Place says where a host path bound into the sandbox appears:
	// preferred where the sandbox has its own mount namespace, else the
	// host path itself.
	Place(host, preferred string) string
	// Wrap builds the host process of inv. The caller starts it (with
	// Start when set), calls Started with its pid, and Done after it
	// exited (or when it could not start).
	Wrap(inv Invocation) (*Wrapped, error)
	// Close releases what New made (cgroups, state directories). The
	// processes it started are gone before (package local waits for
	// them).
	Close() error
	// LimitsEnforced says which limits hold for every command, and how.
	LimitsEnforced() driver.LimitsEnforced
	// Kind names the technique, as Sandbox.Isolation reports it.
	Kind() string
}

// Options are what a backend needs of its sandbox; New reads them once.
type Options struct {
	// Isolation is the configured technique for this operating system
	// (sandbox.local.isolation.linux or .darwin): auto, "", bwrap,
	// gvisor, seatbelt or none.
	Isolation string
	// ID is the sandbox's id: it names its cgroups and, under gVisor,
	// its containers, and appears in the warnings logged.
	ID string
	// Workspace is the workspace on the host; BindWorkspace is what a
	// mount namespace binds as the workspace (Workspace, or the idmapped
	// mount of it); VirtualWorkspace is where it appears there.
	Workspace, BindWorkspace, VirtualWorkspace string
	// RuntimeDir is the sandbox's runtime directory (the Seatbelt tmp,
	// the gVisor state and bundles live there).
	RuntimeDir string
	Mounts     []driver.VolumeMount // resolved and checked (package local's checkMounts)
	Network    driver.NetworkMode   // never ""
	Limits     limits.Limits
	Ident      *uids.Identity // the host uid commands run as; nil: the caller's own
	Umask      fs.FileMode    // set before every command inside
	// SeccompDeny are extra system calls the filter refuses
	// (sandbox.local.seccomp.deny).
	SeccompDeny []string
	// Egress is the network allowlist's proxies; nil without one.
	Egress *Egress
	// Session is set when the sandbox runs a session sandbox: its
	// supervisor may have TaskReserve tasks beyond the pids limit (the
	// sandbox's pids cgroup is that much larger), and each command gets
	// the limit itself.
	Session     bool
	TaskReserve int
}

// Invocation is one command to run inside the sandbox.
type Invocation struct {
	Argv    []string          // the command, as seen inside
	Workdir string            // host path of the working directory
	Chdir   string            // the same directory as seen inside
	Env     map[string]string // extra variables
	Binds   []Bind            // extra binds (interpreters, the venv, code files)
	Venv    string            // inside path of the Python venv to put on PATH, if any
	// Session marks a session sandbox's init (package local's
	// supervisor): its limits are its commands', which it sets for each
	// one itself (no CPU budget of its own, the pids limit plus the
	// reserve), and it sets its umask itself.
	Session bool
	// Caps are the capabilities of the sandbox's first process where the
	// backend grants any (gVisor: a session's supervisor with group
	// tags); none otherwise.
	Caps []string
}

// Bind shows a host path inside the sandbox.
type Bind struct {
	Host, Inside string
	ReadOnly     bool
}

// Wrapped is the host process for an invocation.
type Wrapped struct {
	Path       string
	Args       []string
	Dir        string
	Env        []string
	ExtraFiles []*os.File
	Cred       *syscall.Credential // run as this host uid; nil: as the caller
	Terminate  func()
	// Start starts the process (nil: cmd.Start): bwrap's may be forked
	// from a thread in the sandbox's cgroups.
	Start   func(*exec.Cmd) error
	Started func(pid int) error // runs once the process started; nil: nothing to do
	Done    func()              // releases per-invocation resources after exit
	// Report, when set, says in the result why the command died (the CPU
	// budget); it runs before Done.
	Report func(*driver.CommandResult)
	// Container is runsc's id of the sandbox (Gvisor): its checkpoints
	// name it.
	Container string
}

// Egress is how commands reach the network allowlist's filtering
// proxies.
type Egress struct {
	// Env points every common client at the proxies (HTTP_PROXY,
	// ALL_PROXY, ...); a command's own variables win.
	Env map[string]string
	// Ports are the proxies' loopback ports as commands reach them, the
	// HTTP proxy's and the SOCKS proxy's: on Linux inside the sandbox's
	// network namespace, where the network bridge forwards them to the
	// sockets; on macOS on the host, where the Seatbelt profile allows
	// them and nothing else.
	Ports []int
	// SocketDir is the host directory of the proxies' Unix sockets
	// (http.sock, socks.sock), BridgeExe the network bridge program
	// (Linux).
	SocketDir, BridgeExe string
}

// WithEnv merges the proxy variables under env (whose variables win: a
// command may opt out, and gains nothing by it). Nil-safe: without an
// allowlist it is env.
func (e *Egress) WithEnv(env map[string]string) map[string]string {
	if e == nil {
		return env
	}
	out := make(map[string]string, len(e.Env)+len(env))
	for k, v := range e.Env {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// shell runs the umask and limits prefixes.
const shell = "/bin/sh"
