package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// ListRunning lists the running containers with this backend's prefix
// and installation, except the warm pool's unclaimed ones (ListPool).
func (b *Backend) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return b.list(ctx, false)
}

// list lists running containers (the unclaimed pool's when pooled).
func (b *Backend) list(ctx context.Context, pooled bool, fs ...filters.KeyValuePair) ([]orchestrator.SandboxInfo, error) {
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(append(fs, b.scope()...)...)})
	if err != nil {
		return nil, fmt.Errorf("docker: list: %w", err)
	}
	out := make([]orchestrator.SandboxInfo, 0, len(cs))
	for _, c := range cs {
		ins, err := b.cli.ContainerInspect(ctx, c.ID)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("docker: inspect %s: %w", c.ID, err)
		}
		if info, err := b.toInfo(ins); err == nil && ins.State != nil && ins.State.Running && pooled == unclaimed(info) {
			out = append(out, info)
		}
	}
	return out, nil
}

var (
	_ orchestrator.StoppedLister = (*Backend)(nil)
	_ orchestrator.Snapshotter   = (*Backend)(nil)
)

// ListStopped lists this backend's containers that do not run (created,
// exited, dead), from their labels.
func (b *Backend) ListStopped(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	_, stopped, err := b.ListAll(ctx)
	return stopped, err
}

// ListAll lists every container with this backend's prefix and
// installation, from one engine listing and their labels (no URL):
// running ones (paused and restarting count as running: they hold their
// place) and the others (created, exited, dead).
func (b *Backend) ListAll(ctx context.Context) (running, stopped []orchestrator.SandboxInfo, err error) {
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(b.scope()...)})
	if err != nil {
		return nil, nil, fmt.Errorf("docker: list: %w", err)
	}
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		info := orchestrator.SandboxInfo{SandboxID: c.Labels[LabelID], ThreadID: c.Labels[LabelThread], Owner: c.Labels[LabelOwner],
			ContainerID: c.ID, ContainerName: name, Backend: "docker", Fence: fenceOf(c.Labels)}
		if slot := c.Labels[LabelPool]; slot != "" {
			info.PoolSlot, info.SandboxID = slot, b.idFromName(name, slot)
		}
		if c.State == "running" || c.State == "paused" || c.State == "restarting" {
			running = append(running, info)
		} else {
			stopped = append(stopped, info)
		}
	}
	return running, stopped, nil
}

// RemoveAll force-removes every container (running or not) with this
// backend's prefix and installation. Tests use it to clean up; `sage
// sandbox rm --all` does not: it releases each listed thread through the
// orchestrator (its state record, lock and container).
func (b *Backend) RemoveAll(ctx context.Context) (int, error) {
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(b.scope()...)})
	if err != nil {
		return 0, fmt.Errorf("docker: list: %w", err)
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, b.remove(ctx, c.ID))
	}
	return len(cs), errors.Join(errs...)
}
