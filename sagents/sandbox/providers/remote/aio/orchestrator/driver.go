package orchestrator

import (
	"context"
	"errors"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
)

// NewDriver is the remote provider "aio" without a server_url: a
// Provider built from cfg.Remote (ProviderFromConfig) acquires the thread
// cfg.SandboxID (or provider_config thread_id; empty means an anonymous
// sandbox), and closing the returned driver shuts that Provider down
// according to its shutdown_policy (release by default; keep leaves the
// sandbox for the next process).
func NewDriver(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
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

// sharedHandle is a Handle whose Close is the provider's business.
type sharedHandle struct{ *aiodriver.Handle }

func (sharedHandle) Close(context.Context) error { return nil }

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
