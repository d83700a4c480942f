package local

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
)

// newBackend makes the isolation backend cfg asks for on this operating
// system (package internal/isolation), for s as NewWithOptions has set
// it up so far: its workspace and its bind, runtime directory, limits,
// uid, umask, egress proxies and whether it runs a session sandbox.
func newBackend(ctx context.Context, cfg driver.Config, s *Sandbox) (isolation.Backend, error) {
	o := isolation.Options{Isolation: cfg.Local.Isolation.Linux, ID: s.id, Workspace: s.hostWS, BindWorkspace: s.bindWS,
		VirtualWorkspace: virtualWorkspaceOf(cfg), RuntimeDir: s.runtimeDir, Mounts: cfg.Mounts, Network: s.network,
		Limits: s.limits, Ident: s.ident, Umask: s.umask, SeccompDeny: cfg.Local.SeccompDeny, Egress: s.egress.isolation(),
		Session: s.sess.opts.Enabled, TaskReserve: sessionTaskReserve}
	if runtime.GOOS == "darwin" {
		o.Isolation = cfg.Local.Isolation.Darwin
	}
	if o.Isolation == driver.IsolationGvisor && cfg.Local.Checkpoints && os.Geteuid() != 0 {
		// Said before isolation gvisor's own refusal of a non-root user,
		// which does not name checkpoints.
		return nil, &driver.ConfigError{Field: "sandbox.local.checkpoints", Value: "on",
			Reason: fmt.Sprintf("checkpoints under isolation gvisor run runsc checkpoint and restore as root; sage runs as uid %d; fix: run sage as root, or use isolation bwrap (its checkpoints work unprivileged)", os.Geteuid())}
	}
	return isolation.New(ctx, o)
}

// virtualWorkspaceOf is where the workspace shows inside a sandbox of its
// own mount namespace.
func virtualWorkspaceOf(cfg driver.Config) string {
	if cfg.VirtualWorkspace != "" {
		return cfg.VirtualWorkspace
	}
	return DefaultVirtualWorkspace
}
