package main

import (
	"context"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/faulttest"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// recBackend records every call that creates, destroys, adopts or claims
// a sandbox, with the owner lease and the lock token its context carries.
type recBackend struct {
	b    *dockerbackend.Backend
	rec  *faulttest.Recorder
	host string
}

var (
	_ orchestrator.Backend       = (*recBackend)(nil)
	_ orchestrator.Pooler        = (*recBackend)(nil)
	_ orchestrator.Adopter       = (*recBackend)(nil)
	_ orchestrator.StoppedLister = (*recBackend)(nil)
	_ orchestrator.Snapshotter   = (*recBackend)(nil)
)

func (r *recBackend) record(ctx context.Context, op, thread, sandbox, container string, inv int64, err error) {
	owner, token := orchestrator.Held(ctx)
	e := faulttest.Event{Kind: faulttest.KindOp, Host: r.host, Op: op, Owner: owner, Token: token, Thread: thread,
		Sandbox: sandbox, Container: container, Inv: inv, Comp: faulttest.Now(), OK: err == nil}
	if err != nil {
		e.Err = err.Error()
	}
	r.rec.Add(e)
}

func (r *recBackend) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	inv := faulttest.Now()
	owner, token := orchestrator.Held(ctx) // the invocation too: a create in flight when its process dies still lands
	r.rec.Add(faulttest.Event{Kind: faulttest.KindOp, Host: r.host, Op: "create-invoked", Owner: owner, Token: token,
		Thread: req.ThreadID, Sandbox: req.SandboxID, Inv: inv})
	info, err := r.b.Create(ctx, req)
	r.record(ctx, "create", req.ThreadID, req.SandboxID, info.ContainerID, inv, err)
	return info, err
}

func (r *recBackend) Destroy(ctx context.Context, info orchestrator.SandboxInfo) error {
	inv := faulttest.Now()
	err := r.b.Destroy(ctx, info)
	r.record(ctx, "destroy", info.ThreadID, info.SandboxID, info.ContainerID, inv, err)
	return err
}

func (r *recBackend) Claim(ctx context.Context, pooled orchestrator.SandboxInfo, sid, thread string) (orchestrator.SandboxInfo, error) {
	inv := faulttest.Now()
	info, err := r.b.Claim(ctx, pooled, sid, thread)
	r.record(ctx, "claim", thread, sid, pooled.ContainerID, inv, err)
	return info, err
}

func (r *recBackend) Adopt(ctx context.Context, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	inv := faulttest.Now()
	out, err := r.b.Adopt(ctx, info)
	r.record(ctx, "adopt", info.ThreadID, info.SandboxID, info.ContainerID, inv, err)
	return out, err
}

func (r *recBackend) IsAlive(ctx context.Context, info orchestrator.SandboxInfo) (bool, error) {
	return r.b.IsAlive(ctx, info)
}

func (r *recBackend) Discover(ctx context.Context, id string) (orchestrator.SandboxInfo, bool, error) {
	return r.b.Discover(ctx, id)
}

func (r *recBackend) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return r.b.ListRunning(ctx)
}

func (r *recBackend) ListPool(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return r.b.ListPool(ctx)
}

func (r *recBackend) ListStopped(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return r.b.ListStopped(ctx)
}

func (r *recBackend) ListAll(ctx context.Context) (running, stopped []orchestrator.SandboxInfo, err error) {
	return r.b.ListAll(ctx)
}

// recStore records lock grants, owner leases and lease observations.
type recStore struct {
	s    *redisstore.Store
	rec  *faulttest.Recorder
	host string
}

var (
	_ orchestrator.StateStore   = (*recStore)(nil)
	_ orchestrator.FencedLocker = (*recStore)(nil)
	_ orchestrator.Leaser       = (*recStore)(nil)
	_ orchestrator.Lister       = (*recStore)(nil)
	_ orchestrator.Counter      = (*recStore)(nil)
)

func (r *recStore) Save(ctx context.Context, t string, info orchestrator.SandboxInfo) error {
	return r.s.Save(ctx, t, info)
}

func (r *recStore) Load(ctx context.Context, t string) (orchestrator.SandboxInfo, bool, error) {
	return r.s.Load(ctx, t)
}

func (r *recStore) Remove(ctx context.Context, t string) error { return r.s.Remove(ctx, t) }

func (r *recStore) List(ctx context.Context) (map[string]orchestrator.SandboxInfo, error) {
	return r.s.List(ctx)
}

func (r *recStore) Lock(ctx context.Context, t string) (func(), error) {
	_, unlock, err := r.LockFenced(ctx, t)
	return unlock, err
}

func (r *recStore) LockFenced(ctx context.Context, t string) (context.Context, func(), error) {
	inv := faulttest.Now()
	held, unlock, err := r.s.LockFenced(ctx, t)
	if err == nil {
		owner, _ := orchestrator.Held(ctx)
		_, token := orchestrator.Held(held)
		r.rec.Add(faulttest.Event{Kind: faulttest.KindLock, Host: r.host, Owner: owner, Thread: t, Token: token, Inv: inv, Comp: faulttest.Now(), OK: true})
	}
	return held, unlock, err
}

func (r *recStore) GrantLease(ctx context.Context, owner string) (*orchestrator.Lease, error) {
	inv := faulttest.Now()
	l, err := r.s.GrantLease(ctx, owner)
	e := faulttest.Event{Kind: faulttest.KindLease, Host: r.host, Owner: owner, Inv: inv, Comp: faulttest.Now(), OK: err == nil}
	if err != nil {
		e.Err = err.Error()
	}
	r.rec.Add(e)
	return l, err
}

func (r *recStore) LiveLeases(ctx context.Context, owners []string) (map[string]bool, error) {
	inv := faulttest.Now()
	live, err := r.s.LiveLeases(ctx, owners)
	if err == nil {
		var absent []string
		for _, o := range owners {
			if held, known := live[o]; known && !held {
				absent = append(absent, o)
			}
		}
		if len(absent) > 0 {
			r.rec.Add(faulttest.Event{Kind: faulttest.KindObserve, Host: r.host, Absent: absent, Inv: inv, Comp: faulttest.Now(), OK: true})
		}
	}
	return live, err
}

func (r *recStore) LeaseTTL() time.Duration { return r.s.LeaseTTL() }

func (r *recStore) Reserve(ctx context.Context, id, owner string, max int) error {
	inv := faulttest.Now()
	err := r.s.Reserve(ctx, id, owner, max)
	r.count("reserve", id, owner, inv, err)
	return err
}

func (r *recStore) Unreserve(ctx context.Context, id, owner string) error {
	inv := faulttest.Now()
	err := r.s.Unreserve(ctx, id, owner)
	r.count("unreserve", id, owner, inv, err)
	return err
}

func (r *recStore) count(op, id, owner string, inv int64, err error) {
	e := faulttest.Event{Kind: faulttest.KindCount, Host: r.host, Op: op, Sandbox: id, Owner: owner, Inv: inv, Comp: faulttest.Now(), OK: err == nil}
	if err != nil {
		e.Err = err.Error()
	}
	r.rec.Add(e)
}

func (r *recStore) Reserved(ctx context.Context) (map[string]string, error) { return r.s.Reserved(ctx) }
