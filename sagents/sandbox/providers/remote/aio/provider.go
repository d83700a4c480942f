package aio

import (
	"context"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote"
)

// ProviderName is the remote provider name this package registers.
const ProviderName = "aio"

func init() { remote.Register(ProviderName, newFromConfig) }

// newFromConfig opens a Handle on cfg.Remote.ServerURL. Mounts are not
// supported: the remote sandbox decides what it mounts.
func newFromConfig(ctx context.Context, cfg sandbox.Config) (sandbox.Handle, error) {
	if cfg.Remote.ServerURL == "" {
		return nil, &sandbox.ConfigError{Field: "sandbox.remote.server_url", Reason: "required by the aio provider"}
	}
	if len(cfg.Mounts) > 0 {
		return nil, &sandbox.ConfigError{Field: "sandbox.mounts", Reason: "not supported by the aio provider (the remote sandbox owns its mounts)"}
	}
	return Open(ctx, OpenOptions{
		ServerURL: cfg.Remote.ServerURL, Token: cfg.Remote.APIKey,
		SandboxID: cfg.SandboxID, Timeout: cfg.Timeout,
	})
}
