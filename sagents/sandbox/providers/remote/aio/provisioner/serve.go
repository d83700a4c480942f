package provisioner

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
	// Announce, when set, receives "listening http://<addr>" once bound.
	Announce io.Writer
	// ReadHeaderTimeout bounds reading request headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// ShutdownGrace is how long running requests may finish once ctx is
	// done; 0 means 30 s.
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

// Serve serves h on o.Listen until ctx is done, then shuts down
// gracefully: stop accepting, let running requests finish within
// ShutdownGrace, then close what is left.
func Serve(ctx context.Context, h http.Handler, o ServeOptions) error {
	o = o.withDefaults()
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("provisioner: listen: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}
	if o.Announce != nil {
		fmt.Fprintf(o.Announce, "listening http://%s\n", ln.Addr())
	}
	o.Logger.Info("provisioner serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("provisioner: serve: %w", err)
	case <-ctx.Done():
	}
	o.Logger.Info("provisioner shutting down", "grace", o.ShutdownGrace)
	gctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(gctx); err != nil {
		return errors.Join(fmt.Errorf("provisioner: shutdown: %w", err), hs.Close())
	}
	return nil
}

func (o ServeOptions) withDefaults() ServeOptions {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
