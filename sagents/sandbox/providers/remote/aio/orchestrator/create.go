package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// create is layer 3.
func (p *Provider) create(ctx context.Context, threadID, sid string) (*entry, error) {
	if err := stillHeld(ctx, threadID); err != nil {
		return nil, err
	}
	if threadID != "" {
		if e := p.claim(ctx, threadID, sid); e != nil {
			return e, p.commit(ctx, e)
		}
		if err := p.detachStale(threadID); err != nil {
			return nil, err
		}
	}
	if err := p.reserve(ctx, sid); err != nil {
		return nil, err
	}
	mounts, err := p.threadMounts(threadID)
	if err != nil {
		p.unreserveFailed(ctx, sid)
		return nil, err
	}
	req := p.request(threadID, sid, mounts)
	info, err := p.o.Backend.Create(ctx, req)
	if err != nil {
		p.unreserveFailed(ctx, sid)
		return nil, fmt.Errorf("create sandbox %s: %w", sid, err)
	}
	info.ThreadID, info.SandboxID = threadID, sid
	if info.Owner == "" {
		info.Owner = p.owner()
	}
	if info.CreatedAt.IsZero() {
		info.CreatedAt = time.Now()
	}
	info.LastUsed = time.Now()
	e, err := p.ready(ctx, info)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sandbox %s: %w", sid, err), p.destroy(ctx, info))
	}
	if err := p.commit(ctx, e); err != nil {
		return nil, err
	}
	p.o.Logger.Debug("aio: created sandbox", "thread", threadID, "sandbox", sid, "url", info.URL)
	return e, nil
}

// commit saves e's state (for a thread) and caches it; on failure
// nothing is left behind: the handle is closed, the state removed and the
// sandbox destroyed.
func (p *Provider) commit(ctx context.Context, e *entry) error {
	info, threadID := e.info, e.info.ThreadID
	if threadID != "" {
		if err := p.o.Store.Save(ctx, threadID, info); err != nil {
			e.h.Close(context.WithoutCancel(ctx))
			return errors.Join(err, p.destroy(ctx, info))
		}
	}
	if err := p.cache(e); err != nil { // shut down meanwhile: leave nothing behind
		e.h.Close(context.WithoutCancel(ctx))
		rerr := error(nil)
		if threadID != "" {
			rerr = p.o.Store.Remove(context.WithoutCancel(ctx), threadID)
		}
		return errors.Join(err, p.destroy(ctx, info), rerr)
	}
	return nil
}

func (p *Provider) request(threadID, sid string, mounts []driver.VolumeMount) CreateRequest {
	token := randomHex(16)
	env := make(map[string]string, len(p.o.Env)+1)
	for k, v := range p.o.Env {
		env[k] = v
	}
	env[TokenEnv] = token
	return CreateRequest{SandboxID: sid, ThreadID: threadID, Owner: p.owner(), Image: p.o.Image,
		Port: p.o.Port, Mounts: mounts, Env: env, MemoryMB: p.o.MemoryMB, CPUs: p.o.CPUs, Token: token}
}

// threadMounts creates Home/threads/<id>/user-data/{workspace,uploads,
// outputs} and mounts them at /mnt/user-data/..., plus the skills
// directory (read-only) when it exists, plus the configured mounts.
func (p *Provider) threadMounts(threadID string) ([]driver.VolumeMount, error) {
	var ms []driver.VolumeMount
	if threadID != "" {
		base := filepath.Join(p.o.Home, "threads", threadID, "user-data")
		for _, d := range []string{"workspace", "uploads", "outputs"} {
			host := filepath.Join(base, d)
			if err := os.MkdirAll(host, 0o755); err != nil {
				return nil, fmt.Errorf("thread directory: %w", err)
			}
			ms = append(ms, driver.VolumeMount{HostPath: host, SandboxPath: UserDataPath + "/" + d})
		}
	}
	if fi, err := os.Stat(p.o.SkillsDir); err == nil && fi.IsDir() {
		ms = append(ms, driver.VolumeMount{HostPath: p.o.SkillsDir, SandboxPath: SkillsPath, ReadOnly: true})
	}
	return append(ms, p.o.Mounts...), nil
}

// destroy removes a sandbox even when ctx is already cancelled: a
// failure path must not leak it. The leases ctx carries still fence the
// backend's call (a lost lock refuses it), and its count is given back.
func (p *Provider) destroy(ctx context.Context, info SandboxInfo) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := p.o.Backend.Destroy(dctx, info); err != nil {
		return fmt.Errorf("destroy %s: %w", info.SandboxID, err)
	}
	p.unreserve(dctx, countID(info))
	if info.PoolSlot != "" {
		if err := p.detachSlot(info.ThreadID, info.PoolSlot); err != nil {
			return fmt.Errorf("destroy %s: %w", info.SandboxID, err)
		}
	}
	return nil
}

// ErrTooManySandboxes is returned (wrapped) when a new sandbox or pool
// slot would exceed max_sandboxes.
var ErrTooManySandboxes = errors.New("aio: max_sandboxes reached")
