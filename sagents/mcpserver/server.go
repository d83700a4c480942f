package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sage-go/sage/sagents/tools"
)

// Defaults of [Options].
const (
	DefaultMaxResources     = 1000
	DefaultMaxResourceBytes = 4 << 20
	DefaultMaxRequestBytes  = 8 << 20
	DefaultSessionTimeout   = 30 * time.Minute
)

// Options configure a [Server].
type Options struct {
	// Name and Version identify the server to hosts; the defaults are
	// "sage" and "dev".
	Name, Version string
	// Instructions are sent to the host on initialize.
	Instructions string
	// Files, when set, serves the workspace's files as resources.
	Files Files
	// MaxResources bounds a resource listing; 0 means DefaultMaxResources.
	MaxResources int
	// MaxResourceBytes bounds a resource read; 0 means
	// DefaultMaxResourceBytes.
	MaxResourceBytes int64
	// MaxRequestBytes bounds an HTTP request body of [Server.Handler]; 0
	// means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// SessionTimeout closes idle HTTP sessions; 0 means
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Logger receives the SDK's log; nil logs nothing.
	Logger *slog.Logger
}

// Server is an MCP server for the tools of one [tools.Manager].
type Server struct {
	tm    *tools.Manager
	opts  Options
	mcp   *mcp.Server
	names map[string]bool // the tools

	localOnce sync.Once
	localCS   *mcp.ClientSession
	localErr  error
}

// New returns a Server exposing every tool tm has registered.
func New(tm *tools.Manager, opts Options) (*Server, error) {
	if tm == nil {
		return nil, errors.New("mcpserver: the tools.Manager is nil")
	}
	if opts.Name == "" {
		opts.Name = "sage"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.MaxResources <= 0 {
		opts.MaxResources = DefaultMaxResources
	}
	if opts.MaxResourceBytes <= 0 {
		opts.MaxResourceBytes = DefaultMaxResourceBytes
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	s := &Server{tm: tm, opts: opts, names: map[string]bool{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version},
		&mcp.ServerOptions{Instructions: opts.Instructions, Logger: opts.Logger, Capabilities: &mcp.ServerCapabilities{}})
	for _, d := range tm.Definitions() {
		schema, err := json.Marshal(d.Function.Parameters)
		if err != nil {
			return nil, fmt.Errorf("mcpserver: schema of %s: %w", d.Function.Name, err)
		}
		s.names[d.Function.Name] = true
		s.mcp.AddTool(&mcp.Tool{Name: d.Function.Name, Description: d.Function.Description, InputSchema: json.RawMessage(schema)},
			s.toolHandler(d.Function.Name))
	}
	if opts.Files != nil {
		s.addResources()
	}
	return s, nil
}

// MCP returns the underlying SDK server, e.g. to add prompts.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one client over t until the client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.mcp.Run(ctx, t)
}

// Handler serves the streamable HTTP transport. It checks neither Host,
// Origin nor credentials beyond the SDK's localhost protection: mount it
// behind them (sandboxd's checks). In front of the SDK's handler it
// answers what the specification (2025-06-18, 2025-11-25) asks and the SDK
// does not (sessionGate).
func (s *Server) Handler() http.Handler {
	return &sessionGate{max: s.opts.MaxRequestBytes, next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Logger: s.opts.Logger, MaxRequestBodyBytes: s.opts.MaxRequestBytes,
			SessionTimeout: s.opts.SessionTimeout, PropagateRequestCancellation: true})}
}

func (s *Server) toolHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			ctx = tools.WithProgress(ctx, progressReporter(ctx, req.Session, tok))
		}
		text, err := s.tm.Do(ctx, tools.Call{Name: name, Arguments: req.Params.Arguments})
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
		if err != nil {
			res.IsError = true
			res.StructuredContent = json.RawMessage(tools.AsError(err).JSON())
		}
		return res, nil
	}
}

// progressReporter sends each piece of output as a progress notification
// whose progress is the number of output bytes seen so far.
func progressReporter(ctx context.Context, ss *mcp.ServerSession, token any) tools.ProgressFunc {
	var seen int
	return func(out string) {
		seen += len(out)
		// A host that went away or does not read notifications must not
		// fail or hold the call.
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = ss.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(seen), Message: out})
	}
}

// local is an in-process client session of the server, for callers that
// use its tools without a transport of their own (sandboxd's /v1/mcp
// endpoints of the AIO API).
func (s *Server) local(ctx context.Context) (*mcp.ClientSession, error) {
	s.localOnce.Do(func() {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := s.mcp.Connect(context.WithoutCancel(ctx), st, nil); err != nil {
			s.localErr = err
			return
		}
		c := mcp.NewClient(&mcp.Implementation{Name: s.opts.Name + "-local", Version: s.opts.Version}, nil)
		s.localCS, s.localErr = c.Connect(context.WithoutCancel(ctx), ct, nil)
	})
	return s.localCS, s.localErr
}

// ListTools returns the server's tools as an MCP ListToolsResult.
func (s *Server) ListTools(ctx context.Context) (json.RawMessage, error) {
	cs, err := s.local(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: tools/list: %w", err)
	}
	return json.Marshal(res)
}

// CallTool calls a tool as an MCP host would and returns its
// CallToolResult (a tool's failure is a result with isError set). A tool
// the server does not have is an error wrapping fs.ErrNotExist.
func (s *Server) CallTool(ctx context.Context, name string, arguments json.RawMessage) (json.RawMessage, error) {
	if !s.names[name] {
		return nil, fmt.Errorf("mcpserver: no tool %q: %w", name, fs.ErrNotExist)
	}
	cs, err := s.local(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: arguments})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: tools/call %s: %w", name, err)
	}
	return json.Marshal(res)
}

// Close ends the in-process session, if one was opened.
func (s *Server) Close() error {
	s.localOnce.Do(func() {}) // no session opens after this
	if s.localCS != nil {
		return s.localCS.Close()
	}
	return nil
}
