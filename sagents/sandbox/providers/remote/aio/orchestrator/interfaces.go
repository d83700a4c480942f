package orchestrator

import (
	"context"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// SandboxInfo is what the orchestrating provider, its backends and its
// state stores know of one sandbox. Its JSON is compatible with the seed
// format (sandbox_id, sandbox_url, container_name, container_id,
// created_at); legacy documents with base_url are read too.
type SandboxInfo struct {
	SandboxID     string `json:"sandbox_id"`
	ThreadID      string `json:"thread_id,omitempty"`
	URL           string `json:"sandbox_url"`
	ContainerName string `json:"container_name,omitempty"`
	ContainerID   string `json:"container_id,omitempty"`
	Owner         string `json:"owner,omitempty"`
	// Token is the bearer token the sandbox's API requires (empty: none).
	Token string `json:"token,omitempty"`
	// Backend names the backend that runs it ("docker", "provisioner").
	Backend   string    `json:"backend,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// LastUsed is when a process last created or adopted it (processes
	// do not share their in-memory activity); zero if unknown.
	LastUsed time.Time `json:"last_used_at,omitempty"`
	// Fence is the fencing token the sandbox carries (a Docker label, a
	// Pod annotation): that of the thread lock it was created (or, where
	// the backend can stamp it, last adopted) under; 0: none.
	Fence int64 `json:"fence,omitempty"`
	// PoolSlot is set on a sandbox started for the warm pool: its
	// /mnt/user-data is the host directory Home/pool/<PoolSlot>/user-data,
	// into which a claiming thread's files are moved (and moved back when
	// the sandbox is destroyed). Unclaimed, SandboxID == PoolSlot.
	PoolSlot string `json:"pool_slot,omitempty"`
}

// CreateRequest asks a backend for a new sandbox.
type CreateRequest struct {
	SandboxID string
	ThreadID  string // empty for anonymous sandboxes
	Owner     string // id of the process that creates it
	Image     string
	Port      int // the sandbox API port inside the container
	Mounts    []driver.VolumeMount
	Env       map[string]string
	MemoryMB  int
	CPUs      float64
	// Token, when set, is the bearer token the sandbox's API must require
	// (the sage-sandbox image reads it from SAGE_SANDBOXD_TOKEN, which the
	// provider puts in Env too).
	Token string
	// PoolSlot marks a warm-pool sandbox (labelled so; see Pooler).
	PoolSlot string
}

// Pooler is implemented by backends that can keep a warm pool of
// started, unassigned sandboxes (CreateRequest.PoolSlot set).
type Pooler interface {
	// Claim hands the unclaimed pool sandbox pooled to thread threadID
	// under the id sandboxID: from then on Discover(sandboxID) finds it
	// and ListPool does not list it. It fails if the sandbox is gone or
	// another sandbox already has that id.
	Claim(ctx context.Context, pooled SandboxInfo, sandboxID, threadID string) (SandboxInfo, error)
	// ListPool lists this backend's running, unclaimed pool sandboxes
	// (of every owner).
	ListPool(ctx context.Context) ([]SandboxInfo, error)
}

// Backend runs sandbox containers: Docker directly, or a provisioner
// service (which may run them on Kubernetes).
type Backend interface {
	// Create starts a sandbox. It returns once the container runs; the
	// provider then waits for its API to answer.
	Create(ctx context.Context, req CreateRequest) (SandboxInfo, error)
	// Destroy stops and removes it; a sandbox that is already gone is not
	// an error.
	Destroy(ctx context.Context, info SandboxInfo) error
	// IsAlive reports whether it still runs.
	IsAlive(ctx context.Context, info SandboxInfo) (bool, error)
	// Discover finds a running sandbox by id (by name or label), with its
	// current URL and container id.
	Discover(ctx context.Context, sandboxID string) (SandboxInfo, bool, error)
	// ListRunning lists the sandboxes this backend runs.
	ListRunning(ctx context.Context) ([]SandboxInfo, error)
}

// StateStore persists thread -> sandbox mappings across processes and
// hosts, with a cross-process lock per thread.
type StateStore interface {
	Save(ctx context.Context, threadID string, info SandboxInfo) error
	// Load returns ok false when nothing (or nothing readable) is stored.
	Load(ctx context.Context, threadID string) (info SandboxInfo, ok bool, err error)
	Remove(ctx context.Context, threadID string) error
	// Lock takes the thread's lock, waiting as long as ctx allows.
	Lock(ctx context.Context, threadID string) (unlock func(), err error)
}

// Leaser is implemented by state stores that keep owner leases (redis
// and FileStore do): every sandbox, pool slot and saved state carries the
// id of its owner's lease, renewed while the owner lives, and whatever
// belongs to a lease that ended is collected by any live process
// (Provider.Sweep), as containerd collects what no lease holds.
type Leaser interface {
	// GrantLease starts owner's lease, renewed in the background until
	// it is released or lost. An owner id whose lease is held already
	// is an error.
	GrantLease(ctx context.Context, owner string) (*Lease, error)
	// LiveLeases reports, for each of owners this store knows (one that
	// holds, or held, a lease in it), whether it holds its lease now.
	// An owner the store cannot know of is left out of the map: it is
	// another store's (another home sharing the backend, as two users of
	// one provisioner), and nobody here may take it for dead.
	LiveLeases(ctx context.Context, owners []string) (map[string]bool, error)
	// LeaseTTL is how long a lease outlives its holder's last renewal
	// (0: it ends with its holder, as a flock does). A sweep believes a
	// lease has ended only after seeing it absent for that long, so a
	// holder that has not yet noticed its loss has stopped by then.
	LeaseTTL() time.Duration
}

// Counter is implemented by state stores that count the deployment's
// sandboxes for max_sandboxes (redis and FileStore do), so that the
// bound holds across goroutines, processes and hosts: every sandbox and
// pool slot is reserved under its id before it is created and given back
// when it is destroyed.
type Counter interface {
	// Reserve counts id for owner, unless max (> 0) are counted already:
	// then it fails with an error wrapping ErrTooManySandboxes. An id
	// counted already is not counted twice (its owner is updated).
	Reserve(ctx context.Context, id, owner string, max int) error
	// Unreserve stops counting id; an id not counted is not an error.
	// With owner set it does so only while id is counted for owner:
	// sandbox ids of threads are deterministic, so a create that failed
	// must not give back the count a newer holder's create of the same
	// id now shares (owner "": whoever counts it, as after a destroy).
	Unreserve(ctx context.Context, id, owner string) error
	// Reserved lists what is counted: id -> owner.
	Reserved(ctx context.Context) (map[string]string, error)
}

// Adopter is implemented by backends that record, on the sandbox itself,
// which holder of the thread's lock took it over (the kube backend
// patches the Pod's fencing annotation under its resourceVersion). Adopt
// is called under the thread's lock before a process takes over a
// sandbox it found: it fails with an error wrapping ErrStaleFence when
// the sandbox carries a newer token than Fence(ctx), else it stamps that
// token (where it can) so that former holders' late destroys are
// refused. The Docker backend compares only (labels cannot change).
type Adopter interface {
	Adopt(ctx context.Context, info SandboxInfo) (SandboxInfo, error)
}

// StoppedLister is implemented by backends whose sandboxes can exist
// without running (a Docker container created but never started, because
// its creator died in between, or one that exited): a sweep collects a
// dead owner's too. Their SandboxInfo has no URL.
type StoppedLister interface {
	ListStopped(ctx context.Context) ([]SandboxInfo, error)
}

// Snapshotter is implemented by backends that can list every sandbox
// they have, running or not, in one read of the engine. A sweep gives
// back a dead owner's max_sandboxes count only for a sandbox it does not
// see; from separate ListRunning, ListPool and ListStopped calls, one
// that changed state between two of them (started, or claimed from the
// pool) is in none, and its count would be given back while it runs.
type Snapshotter interface {
	// ListAll returns the sandboxes of every owner: running ones (the
	// unclaimed pool's among them, PoolSlot set) and those that exist
	// without running (as ListStopped returns them).
	ListAll(ctx context.Context) (running, stopped []SandboxInfo, err error)
}
