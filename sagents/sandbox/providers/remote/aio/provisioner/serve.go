package provisioner

import (
	"context"
	"net/http"

	"github.com/sage-go/sage/internal/httpserve"
)

// ServeOptions configure Serve (the one options type of sage's servers).
type ServeOptions = httpserve.ServeOptions

// LoopbackAddr reports whether host:port binds only loopback addresses.
func LoopbackAddr(hostport string) bool { return httpserve.LoopbackAddr(hostport) }

// Serve serves h on o.Listen until ctx is done, then shuts down
// gracefully: stop accepting, let running requests finish within
// ShutdownGrace, then cancel what is left.
func Serve(ctx context.Context, h http.Handler, o ServeOptions) error {
	return httpserve.Serve(ctx, h, httpserve.Options{Name: "provisioner", ServeOptions: o})
}
