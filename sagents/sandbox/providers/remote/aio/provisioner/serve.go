package provisioner

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sage-go/sage/internal/httpserve"
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
func LoopbackAddr(hostport string) bool { return httpserve.LoopbackAddr(hostport) }

// Serve serves h on o.Listen until ctx is done, then shuts down
// gracefully: stop accepting, let running requests finish within
// ShutdownGrace, then cancel what is left.
func Serve(ctx context.Context, h http.Handler, o ServeOptions) error {
	return httpserve.Serve(ctx, h, httpserve.Options{Name: "provisioner", Listen: o.Listen, Announce: o.Announce,
		ReadHeaderTimeout: o.ReadHeaderTimeout, ShutdownGrace: o.ShutdownGrace, Logger: o.Logger})
}
