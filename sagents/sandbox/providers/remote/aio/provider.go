package aio

import (
	"context"
	"errors"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote"
)

// ProviderName is the remote provider name this package registers.
const ProviderName = "aio"

func init() { remote.Register(ProviderName, newFromConfig) }

// newFromConfig opens a Handle. With a ServerURL it connects to that
// running sandbox (mounts are then unsupported: the remote sandbox owns
// them). Without one it orchestrates: a Provider built from the config
// (ProviderFromConfig) acquires the thread cfg.SandboxID (or
// provider_config thread_id; empty means an anonymous sandbox), and
// closing the Handle shuts that Provider down according to its
// shutdown_policy (release by default; keep leaves the sandbox for the
// next process).
func newFromConfig(ctx context.Context, cfg sandbox.Config) (sandbox.Driver, error) {
	if cfg.Remote.ServerURL == "" {
		return acquireFromConfig(ctx, cfg)
	}
	if len(cfg.Mounts) > 0 {
		return nil, &sandbox.ConfigError{Field: "sandbox.mounts", Reason: "not supported by the aio provider with a server_url (the remote sandbox owns its mounts)"}
	}
	return Open(ctx, OpenOptions{
		ServerURL: cfg.Remote.ServerURL, Token: cfg.Remote.APIKey,
		SandboxID: cfg.SandboxID, Timeout: cfg.Timeout,
	})
}

func acquireFromConfig(ctx context.Context, cfg sandbox.Config) (sandbox.Driver, error) {
	p, err := ProviderFromConfig(cfg.Remote, ProviderOptions{Mounts: cfg.Mounts, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	thread := cfg.SandboxID
	if thread == "" {
		thread = str(cfg.Remote.ProviderConfig, KeyThreadID, "")
	}
	sid, err := p.Acquire(ctx, thread)
	if err != nil {
		return nil, errors.Join(err, p.Shutdown(context.WithoutCancel(ctx)))
	}
	h, _ := p.Get(sid)
	return &ownedHandle{sharedHandle: h.Driver().(sharedHandle), p: p}, nil
}

// ownedHandle is a Handle whose Close shuts its Provider down.
type ownedHandle struct {
	sharedHandle
	p *Provider
}

// ID is the sandbox id.
func (h *ownedHandle) ID() string { return h.sharedHandle.ID() }

// Provider is the Provider behind the Handle.
func (h *ownedHandle) Provider() *Provider { return h.p }

// Close closes the Handle and shuts the Provider down.
func (h *ownedHandle) Close(ctx context.Context) error {
	return errors.Join(ignoreClosed(h.sharedHandle.Handle.Close(ctx)), h.p.Shutdown(ctx))
}
