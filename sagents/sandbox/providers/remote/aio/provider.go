package aio

import (
	"context"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// ProviderName is the remote provider name this package registers.
const ProviderName = "aio"

func init() { remote.Register(ProviderName, newFromConfig) }

// newFromConfig opens a driver. With a ServerURL it connects to that
// running sandbox (mounts are then unsupported: the remote sandbox owns
// them). Without one it orchestrates (orchestrator.NewDriver): the
// thread's sandbox is acquired, and closing the driver shuts the Provider
// down according to its shutdown_policy.
func newFromConfig(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
	if cfg.Remote.ServerURL == "" {
		return orchestrator.NewDriver(ctx, cfg)
	}
	if len(cfg.Mounts) > 0 {
		return nil, &driver.ConfigError{Field: "sandbox.mounts", Reason: "not supported by the aio provider with a server_url (the remote sandbox owns its mounts)"}
	}
	return aiodriver.Open(ctx, aiodriver.OpenOptions{
		ServerURL: cfg.Remote.ServerURL, Token: cfg.Remote.APIKey,
		SandboxID: cfg.SandboxID, Timeout: cfg.Timeout,
	})
}
