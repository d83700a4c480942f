package aioserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
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
func LoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve listens and serves s until ctx is done, then shuts down
// gracefully: it stops accepting, lets running requests finish within
// ShutdownGrace, cancels the rest, and closes the server's sessions.
func Serve(ctx context.Context, s *Server, o ServeOptions) error {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("aioserver: listen: %w", err)
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{Handler: s, ReadHeaderTimeout: o.ReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}
	if o.Announce != nil {
		fmt.Fprintf(o.Announce, "listening http://%s\n", ln.Addr())
	}
	o.Logger.Info("sandboxd serving", "addr", ln.Addr().String(), "workspace", s.h.WorkspacePath())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("aioserver: serve: %w", err)
	case <-ctx.Done():
	}
	return shutdown(hs, s, cancelBase, o)
}

func shutdown(hs *http.Server, s *Server, cancelBase context.CancelFunc, o ServeOptions) error {
	o.Logger.Info("sandboxd shutting down", "grace", o.ShutdownGrace)
	s.ready.Store(false)
	gctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
	defer cancel()
	err := hs.Shutdown(gctx)
	if errors.Is(err, context.DeadlineExceeded) {
		o.Logger.Warn("sandboxd: grace period over; cancelling running commands")
		cancelBase()
		time.Sleep(100 * time.Millisecond)
		err = hs.Close()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	return errors.Join(err, s.Close(cctx))
}
