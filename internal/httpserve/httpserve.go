// Package httpserve runs the project's HTTP services (sage sandboxd, sage
// provisioner): listen, announce the bound address, serve until the
// context ends, then shut down gracefully within a grace period.
package httpserve

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

// ServeOptions configure a server: the one options type of sandboxd and
// the provisioner (aioserver.ServeOptions and provisioner.ServeOptions
// are this type).
type ServeOptions struct {
	// Listen is host:port; port 0 picks a free port.
	Listen string
	// Announce, when set, receives one line "listening http://<addr>" once
	// the listener is bound.
	Announce io.Writer
	// ReadHeaderTimeout bounds reading request headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// ShutdownGrace is how long running requests may finish once the
	// context is done; 0 means 30 s. Requests still running then have
	// their contexts cancelled and the server is closed.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
}

// Options configure Serve: the server's ServeOptions and what its
// package adds.
type Options struct {
	ServeOptions
	Name string // for logs and errors, e.g. "sandboxd"
	// OnShutdown runs when the context is done, before the server stops
	// accepting (a readiness flag goes down here).
	OnShutdown func()
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

func (o Options) withDefaults() Options {
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

// Serve serves h on o.Listen until ctx is done, then shuts down.
func Serve(ctx context.Context, h http.Handler, o Options) error {
	o = o.withDefaults()
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", o.Name, err)
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}
	if o.Announce != nil {
		fmt.Fprintf(o.Announce, "listening http://%s\n", ln.Addr())
	}
	o.Logger.Info(o.Name+" serving", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("%s: serve: %w", o.Name, err)
	case <-ctx.Done():
	}
	return shutdown(hs, cancelBase, o)
}

func shutdown(hs *http.Server, cancelBase context.CancelFunc, o Options) error {
	o.Logger.Info(o.Name+" shutting down", "grace", o.ShutdownGrace)
	if o.OnShutdown != nil {
		o.OnShutdown()
	}
	gctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
	defer cancel()
	err := hs.Shutdown(gctx)
	if errors.Is(err, context.DeadlineExceeded) {
		o.Logger.Warn(o.Name + ": grace period over; cancelling running requests")
		cancelBase()
		time.Sleep(100 * time.Millisecond)
		err = hs.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: shutdown: %w", o.Name, err)
	}
	return nil
}
