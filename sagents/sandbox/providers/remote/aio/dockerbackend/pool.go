package dockerbackend

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/filters"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

var _ orchestrator.Pooler = (*Backend)(nil)

// unclaimed reports whether a pool container still waits for a thread.
func unclaimed(info orchestrator.SandboxInfo) bool {
	return info.PoolSlot != "" && info.SandboxID == info.PoolSlot
}

// idFromName is a pool container's current sandbox id: its name after
// the prefix (a claim renames it), else the slot id it was created with.
func (b *Backend) idFromName(name, slot string) string {
	if id, ok := strings.CutPrefix(name, b.o.Prefix+"-"); ok && id != "" {
		return id
	}
	return slot
}

// Claim renames an unclaimed pool container to the thread's sandbox
// name: the engine renames atomically and refuses a name in use, so a
// container is claimed once and Discover(sandboxID) finds it afterwards.
// Labels cannot change; the pool label stays, and the name says which
// sandbox it now is.
func (b *Backend) Claim(ctx context.Context, pooled orchestrator.SandboxInfo, sandboxID, threadID string) (orchestrator.SandboxInfo, error) {
	if !unclaimed(pooled) || pooled.ContainerID == "" {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: claim %s: not an unclaimed pool sandbox", pooled.SandboxID)
	}
	ins, err := b.cli.ContainerInspect(ctx, pooled.ContainerID)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: claim %s: %w", pooled.SandboxID, err)
	}
	if ins.Config == nil || !b.ours(ins.Config.Labels) || ins.State == nil || !ins.State.Running ||
		strings.TrimPrefix(ins.Name, "/") != b.Name(pooled.PoolSlot) {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: claim %s: the pool container is gone, stopped or already claimed", pooled.SandboxID)
	}
	if _, err := orchestrator.Fence(ctx); err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: claim %s: %w", pooled.SandboxID, err)
	}
	if err := b.cli.ContainerRename(ctx, pooled.ContainerID, b.Name(sandboxID)); err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: claim %s as %s: %w", pooled.SandboxID, b.Name(sandboxID), err)
	}
	info := pooled
	info.SandboxID, info.ThreadID, info.ContainerName = sandboxID, threadID, b.Name(sandboxID)
	return info, nil
}

// ListPool lists the running, unclaimed pool containers of this
// backend's prefix and installation (every owner's).
func (b *Backend) ListPool(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return b.list(ctx, true, filters.Arg("label", LabelPool))
}
