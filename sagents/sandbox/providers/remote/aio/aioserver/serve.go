package aioserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/sage-go/sage/internal/httpserve"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// Listen is host:port; port 0 picks a free port.
	Listen string
	// Announce, when set, receives one line "listening http://<addr>"
	// once the listener is bound (sandboxd prints it on stdout).
	Announce io.Writer
	// ReadHeaderTimeout bounds reading request headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// ShutdownGrace is how long running requests may finish after ctx is
	// done; the rest are cancelled (their process groups killed). 0 means
	// 30 s.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
}

// LoopbackAddr reports whether host:port binds only loopback addresses.
func LoopbackAddr(hostport string) bool { return httpserve.LoopbackAddr(hostport) }

// Serve listens and serves s until ctx is done, then shuts down
// gracefully: readiness goes down, it stops accepting, lets running
// requests finish within ShutdownGrace, cancels the rest (their process
// groups are killed), and closes the server's sessions.
func Serve(ctx context.Context, s *Server, o ServeOptions) error {
	err := httpserve.Serve(ctx, s, httpserve.Options{Name: "sandboxd", Listen: o.Listen, Announce: o.Announce,
		ReadHeaderTimeout: o.ReadHeaderTimeout, ShutdownGrace: o.ShutdownGrace, Logger: o.Logger,
		OnShutdown: func() { s.ready.Store(false) }})
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, s.Close(cctx))
}
