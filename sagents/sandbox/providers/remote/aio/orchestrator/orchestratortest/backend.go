package orchestratortest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Backend is an in-memory [orchestrator.Backend]: the sandboxes it "runs"
// are entries of a map, every create request is recorded, and Create or
// Check fail where a test says so. The zero value is ready to use. It also
// implements Check(ctx) error, the health check the provisioner asks of a
// backend.
type Backend struct {
	// URL gives a new sandbox's URL; nil means "http://sandbox-<id>:<port>".
	// Set it before first use.
	URL func(orchestrator.CreateRequest) string

	mu        sync.Mutex
	boxes     map[string]orchestrator.SandboxInfo
	reqs      []orchestrator.CreateRequest
	destroyed []orchestrator.SandboxInfo
	creates   int
	createErr error
	checkErr  error
}

// Create records req and, unless FailCreate set an error, runs the sandbox
// (or returns the one already running under that id).
func (b *Backend) Create(_ context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, req)
	if b.createErr != nil {
		return orchestrator.SandboxInfo{}, b.createErr
	}
	b.creates++
	if info, ok := b.boxes[req.SandboxID]; ok {
		return info, nil
	}
	url := fmt.Sprintf("http://sandbox-%s:%d", req.SandboxID, req.Port)
	if b.URL != nil {
		url = b.URL(req)
	}
	info := orchestrator.SandboxInfo{SandboxID: req.SandboxID, ThreadID: req.ThreadID, Owner: req.Owner, URL: url,
		ContainerName: "c-" + req.SandboxID, ContainerID: "id-" + req.SandboxID, CreatedAt: time.Unix(1700000000, 0).UTC()}
	if b.boxes == nil {
		b.boxes = map[string]orchestrator.SandboxInfo{}
	}
	b.boxes[req.SandboxID] = info
	return info, nil
}

// Destroy records info and forgets its sandbox.
func (b *Backend) Destroy(_ context.Context, info orchestrator.SandboxInfo) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.destroyed = append(b.destroyed, info)
	delete(b.boxes, info.SandboxID)
	return nil
}

// IsAlive reports whether info's sandbox runs.
func (b *Backend) IsAlive(_ context.Context, info orchestrator.SandboxInfo) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.boxes[info.SandboxID]
	return ok, nil
}

// Discover finds a running sandbox by id.
func (b *Backend) Discover(_ context.Context, sandboxID string) (orchestrator.SandboxInfo, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	info, ok := b.boxes[sandboxID]
	return info, ok, nil
}

// ListRunning lists the running sandboxes.
func (b *Backend) ListRunning(context.Context) ([]orchestrator.SandboxInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]orchestrator.SandboxInfo, 0, len(b.boxes))
	for _, info := range b.boxes {
		out = append(out, info)
	}
	return out, nil
}

// Check returns the error SetCheckErr gave it.
func (b *Backend) Check(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checkErr
}

// FailCreate makes every later Create fail with err (nil: succeed again).
func (b *Backend) FailCreate(err error) { b.mu.Lock(); b.createErr = err; b.mu.Unlock() }

// SetCheckErr makes Check return err.
func (b *Backend) SetCheckErr(err error) { b.mu.Lock(); b.checkErr = err; b.mu.Unlock() }

// Vanish forgets a sandbox without a Destroy, as when it is removed behind
// the provider's back.
func (b *Backend) Vanish(sandboxID string) { b.mu.Lock(); delete(b.boxes, sandboxID); b.mu.Unlock() }

// Creates counts the Create calls that succeeded.
func (b *Backend) Creates() int { b.mu.Lock(); defer b.mu.Unlock(); return b.creates }

// Running counts the running sandboxes.
func (b *Backend) Running() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.boxes) }

// Requests returns the create requests so far, failed ones included.
func (b *Backend) Requests() []orchestrator.CreateRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.reqs)
}

// Destroyed returns what Destroy was given so far.
func (b *Backend) Destroyed() []orchestrator.SandboxInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.destroyed)
}

var _ orchestrator.Backend = (*Backend)(nil)
