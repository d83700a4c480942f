package aioserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// Options configure a Server.
type Options struct {
	// Handle is the sandbox served. The Server does not close it.
	Handle *sandbox.Sandbox
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string
	// MaxBodyBytes bounds request bodies (413 beyond); 0 means 32 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds reading one request body (408 beyond); 0 means
	// 60 s.
	BodyTimeout time.Duration
	// DefaultTimeout applies to commands without hard_timeout; 0 means
	// 10 minutes.
	DefaultTimeout time.Duration
	// Version is reported by GET /v1/sandbox.
	Version string
	Logger  *slog.Logger
	// AllowedHosts are Host header values served besides loopback ones
	// (localhost, 127.0.0.1, [::1], any port) and the IP address the
	// connection arrived on; a name matches with or without a port, "*"
	// matches any. Other Host values get 421: a browser page that rebinds
	// its own name to this server cannot read its answers.
	AllowedHosts []string
	// AllowedOrigins are Origin header values accepted besides the
	// server's own origin; a request with any other Origin (a browser
	// page from elsewhere) gets 403.
	AllowedOrigins []string
	// MaxReadBytes bounds the content POST /v1/file/read returns (it
	// reads at most one byte more); 0 means 16 MiB. GET
	// /v1/file/download streams without a limit.
	MaxReadBytes int64
	// MaxEntries bounds the entries read by /v1/file/list, find and grep;
	// past it the answer has truncated: true. 0 means
	// driver.DefaultMaxEntries.
	MaxEntries int
	// NewShell opens the shell of each /v1/shell session; nil means
	// NewLiveShell (one long-lived bash per session, fed over its stdin;
	// where it cannot run, NewReplayShell, which replays the working
	// directory and exported environment on each command).
	NewShell ShellFactory
	// Mounts are more handlers by ServeMux pattern (sandboxd's "/mcp"),
	// served behind the same Host, Origin and token checks.
	Mounts map[string]http.Handler
	// MCPServers are the MCP servers the AIO API's /v1/mcp endpoints list
	// and call, by name (sandboxd's own tools, also served at /mcp).
	MCPServers map[string]ToolServer
}

// ToolServer is an MCP server whose tools GET /v1/mcp/{server}/tools lists
// and POST /v1/mcp/{server}/tools/{tool} calls, in MCP's own shapes.
type ToolServer interface {
	// ListTools returns an MCP ListToolsResult.
	ListTools(ctx context.Context) (json.RawMessage, error)
	// CallTool returns an MCP CallToolResult; a tool the server does not
	// have is an error wrapping fs.ErrNotExist.
	CallTool(ctx context.Context, name string, arguments json.RawMessage) (json.RawMessage, error)
}

// Server is an http.Handler serving one sandbox.
type Server struct {
	opts     Options
	h        *sandbox.Sandbox
	mux      *http.ServeMux
	ready    atomic.Bool
	sessions *sessions
	kernels  *kernels
	// unhook removes kernels from the Handle's checkpoints (Close).
	unhook  func()
	history editHistory
	// base is the context of the commands the server runs; Close ends it.
	base       context.Context
	cancelBase context.CancelFunc
}

// New returns a Server; it answers GET /v1/sandbox with 503 until Ready
// has succeeded.
func New(opts Options) (*Server, error) {
	if opts.Handle == nil {
		return nil, errors.New("aioserver: Options.Handle is nil")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 60 * time.Second
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = 10 * time.Minute
	}
	if opts.Version == "" {
		opts.Version = "sage-sandboxd"
	}
	if opts.MaxReadBytes <= 0 {
		opts.MaxReadBytes = 16 << 20
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = driver.DefaultMaxEntries
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NewShell == nil {
		opts.NewShell = NewLiveShell
	}
	s := &Server{opts: opts, h: opts.Handle, mux: http.NewServeMux(), sessions: newSessions(opts.Handle, opts.NewShell),
		kernels: newKernels(opts.Handle)}
	// The Python kernels' variables are saved and restored with the
	// Handle's checkpoints (kernel_checkpoint.go).
	s.unhook = opts.Handle.AddProcessCheckpointer(s.kernels)
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /v1/sandbox", s.sandboxInfo)
	m.HandleFunc("POST /v1/shell/exec", s.shellExec)
	m.HandleFunc("POST /v1/shell/sessions/create", s.shellCreate)
	m.HandleFunc("DELETE /v1/shell/sessions/{session_id}", s.shellDelete)
	m.HandleFunc("GET /v1/shell/sessions", s.shellSessions)
	m.HandleFunc("DELETE /v1/shell/sessions", s.shellSessionsDelete)
	m.HandleFunc("POST /v1/shell/view", s.shellView)
	m.HandleFunc("POST /v1/shell/wait", s.shellWait)
	m.HandleFunc("POST /v1/shell/kill", s.shellKill)
	m.HandleFunc("POST /v1/shell/write", s.shellWrite)
	m.HandleFunc("GET /v1/bash/sessions", s.bashSessions)
	m.HandleFunc("POST /v1/bash/exec", s.bashExec)
	m.HandleFunc("POST /v1/bash/output", s.bashOutput)
	m.HandleFunc("POST /v1/bash/kill", s.bashKill)
	m.HandleFunc("POST /v1/bash/write", s.bashWrite)
	m.HandleFunc("POST /v1/bash/sessions/create", s.bashCreate)
	m.HandleFunc("POST /v1/bash/sessions/{session_id}/close", s.bashClose)
	m.HandleFunc("POST /v1/file/read", s.fileRead)
	m.HandleFunc("POST /v1/file/write", s.fileWrite)
	m.HandleFunc("POST /v1/file/list", s.fileList)
	m.HandleFunc("GET /v1/file/download", s.fileDownload)
	m.HandleFunc("POST /v1/file/upload", s.fileUpload)
	m.HandleFunc("POST /v1/file/find", s.fileFind)
	m.HandleFunc("POST /v1/file/grep", s.fileGrep)
	m.HandleFunc("POST /v1/file/glob", s.fileGlob)
	m.HandleFunc("POST /v1/file/replace", s.fileReplace)
	m.HandleFunc("POST /v1/file/search", s.fileSearch)
	m.HandleFunc("POST /v1/file/str_replace_editor", s.strReplaceEditor)
	m.HandleFunc("POST /v1/code/execute", s.codeExecute)
	m.HandleFunc("POST /v1/jupyter/execute", s.jupyterExecute)
	m.HandleFunc("POST /v1/nodejs/execute", s.nodejsExecute)
	m.HandleFunc("GET /v1/mcp/servers", s.mcpServers)
	m.HandleFunc("GET /v1/mcp/{server}/tools", s.mcpTools)
	m.HandleFunc("POST /v1/mcp/{server}/tools/{tool}", s.mcpCall)
	for pattern, h := range s.opts.Mounts {
		m.Handle(pattern, h)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		envelopeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path, nil,
			"sage sandboxd implements a subset of the AIO Sandbox API")
	})
}

// ServeHTTP checks the Host header, the Origin header and the bearer
// token, then dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r) {
		w.Header().Set("Connection", "close")
		envelopeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q is not served here: use a loopback address or one given with --allowed-host", r.Host), nil, "")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(r, o) {
		envelopeError(w, http.StatusForbidden, fmt.Sprintf("cross-origin request refused (Origin %q); allow it with --allowed-origin", o), nil, "")
		return
	}
	if s.opts.Token != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
		envelopeError(w, http.StatusUnauthorized, "missing or wrong bearer token", nil, "")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// hostAllowed: loopback names and addresses, the address the connection
// came in on (an IP literal cannot be a rebound name), AllowedHosts.
func (s *Server) hostAllowed(r *http.Request) bool {
	host := r.Host
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if name == "" {
		return false
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && la.IP.Equal(ip) {
			return true
		}
	}
	for _, a := range s.opts.AllowedHosts {
		if a == "*" || strings.EqualFold(a, name) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// originAllowed: the server's own origin (its Host, already checked) or
// one of AllowedOrigins.
func (s *Server) originAllowed(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	if strings.EqualFold(origin, scheme+r.Host) {
		return true
	}
	for _, a := range s.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	return false
}

func (s *Server) authorized(r *http.Request) bool {
	want := "Bearer " + s.opts.Token
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Ready runs a trivial command; GET /v1/sandbox answers 200 once it
// succeeded.
func (s *Server) Ready(ctx context.Context) error {
	res, err := s.h.ExecuteCommand(ctx, "true", driver.ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("aioserver: readiness command: %w", err)
	}
	if !res.Success {
		return fmt.Errorf("aioserver: readiness command: exit %d: %s", res.ExitCode, res.Stderr)
	}
	s.ready.Store(true)
	return nil
}

// StopIdleShells ends the idle bash of each /v1/shell session and waits
// for them, so that the sandbox is between commands (sage sandboxd calls
// it before a checkpoint, a rollback or a fork of the workspace). Each
// session's next command starts a new bash in its directory. Kernels
// (/v1/jupyter, /v1/code) are left running.
func (s *Server) StopIdleShells(ctx context.Context) { s.sessions.stopIdleShells(ctx) }

// Close kills the background commands of every session.
func (s *Server) Close(ctx context.Context) error {
	s.ready.Store(false)
	err := s.sessions.closeAll(ctx)
	s.unhook()
	s.kernels.closeAll(ctx)
	s.cancelBase()
	return err
}

func (s *Server) sandboxInfo(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		envelopeError(w, http.StatusServiceUnavailable, "sandbox is not ready", nil,
			"the start-up command has not succeeded yet; retry shortly")
		return
	}
	ws := s.h.WorkspacePath()
	msg := okMessage
	username := "unknown"
	if u, err := user.Current(); err == nil {
		username = u.Username
	}
	tz := time.Local.String()
	writeJSON(w, http.StatusOK, aio.SandboxContext{
		Success: true, Message: &msg, HomeDir: ws, Workspace: &ws, Version: s.opts.Version,
		Detail: aio.SandboxDetail{
			System: aio.SystemEnv{OS: runtime.GOOS, OSVersion: osVersion(), Arch: runtime.GOARCH, User: username,
				HomeDir: ws, Workspace: &ws, Timezone: tz, OccupiedPorts: []string{}},
			Runtime: aio.RuntimeEnv{Python: []aio.ToolSpec{}, Nodejs: []aio.ToolSpec{}},
			Utils:   []aio.ToolCategory{},
		},
	})
}

func osVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return string(b)
}
