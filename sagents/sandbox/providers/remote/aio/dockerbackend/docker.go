package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/sage-go/sage/internal/ctxsleep"
	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Labels set on every sandbox container.
const (
	LabelManaged = "sage.sandbox"        // "1"
	LabelID      = "sage.sandbox.id"     // the sandbox id
	LabelThread  = "sage.sandbox.thread" // the thread id ("" if anonymous)
	LabelOwner   = "sage.sandbox.owner"  // the creating process's owner id
	LabelPrefix  = "sage.sandbox.prefix" // the container prefix
	// LabelInstallation is the installation id: two deployments that
	// share a Docker engine (and even a prefix) never see each other's
	// containers.
	LabelInstallation = "sage.sandbox.installation"
	// LabelPool is the pool slot id of a container started for the warm
	// pool (its first sandbox id); once claimed, the container's name
	// carries the thread's sandbox id.
	LabelPool = "sage.sandbox.pool"
	// LabelFence is the fencing token of the thread lock the container
	// was created under (orchestrator.Fence): a call under an older
	// token may not destroy or adopt it.
	LabelFence = "sage.sandbox.fence"
)

// DefaultPrefix is the default container name prefix.
const DefaultPrefix = "sage-sandbox"

// Options configure New.
type Options struct {
	// Client is the Docker API client; nil means one from the environment
	// (DOCKER_HOST etc.) with API version negotiation.
	Client *client.Client
	// Prefix starts every container name (default "sage-sandbox").
	Prefix string
	// HostIP is where sandbox ports are published (default 127.0.0.1).
	HostIP string
	// AdvertiseHost is the host name or address put in sandbox URLs, the
	// one clients reach the published ports on (default: HostIP, or
	// 127.0.0.1 when HostIP is 0.0.0.0).
	AdvertiseHost string
	// PidsLimit bounds processes per container (default 1024, -1 none).
	PidsLimit int64
	// StartTimeout bounds waiting for an adopted container to run
	// (default 20 s).
	StartTimeout time.Duration
	// Installation labels every container; Discover, ListRunning and
	// RemoveAll see only containers with this prefix and this
	// installation id. Default: installationFor(sagehome.Dir()).
	Installation string
	// Runtime is the engine's OCI runtime for sandbox containers, e.g.
	// "runsc" for gVisor; empty means the engine's default. New does
	// not check it; NewChecked and the "runtime" provider key do.
	Runtime string
	// Network, when set, attaches sandbox containers to that Docker
	// network instead of publishing their port: their URL is the
	// container's address there. For a provider that itself runs in a
	// container on that network (with the engine's socket mounted),
	// which cannot reach ports published on the host's 127.0.0.1.
	Network string
}

// Backend is the Docker orchestrator.Backend.
type Backend struct {
	cli *client.Client
	o   Options
}

var _ orchestrator.Backend = (*Backend)(nil)

// New returns a Docker backend.
func New(o Options) (*Backend, error) {
	if o.Client == nil {
		c, err := NewClient()
		if err != nil {
			return nil, err
		}
		o.Client = c
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.HostIP == "" {
		o.HostIP = "127.0.0.1"
	}
	if o.PidsLimit == 0 {
		o.PidsLimit = 1024
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 20 * time.Second
	}
	if o.Installation == "" {
		o.Installation = installationFor(sagehome.Dir())
	}
	return &Backend{cli: o.Client, o: o}, nil
}

// NewClient connects to the Docker Engine named by the environment,
// negotiating the API version (Docker 20.10 speaks 1.41).
func NewClient() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	return c, nil
}

// Client is the Docker API client.
func (b *Backend) Client() *client.Client { return b.cli }

// Prefix is the container name prefix.
func (b *Backend) Prefix() string { return b.o.Prefix }

// Name is the container name of a sandbox.
func (b *Backend) Name(sandboxID string) string { return b.o.Prefix + "-" + sandboxID }

// Create creates and starts the sandbox's container. On a name conflict
// it adopts the existing container (starting it if it was created but
// never started, replacing it if it exited). Any failure after the
// container exists removes it.
func (b *Backend) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: create %s: %w", b.Name(req.SandboxID), err)
	}
	cfg, hc, err := b.spec(req)
	if err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	if token > 0 {
		cfg.Labels[LabelFence] = strconv.FormatInt(token, 10)
	}
	name := b.Name(req.SandboxID)
	for attempt := 0; ; attempt++ {
		if _, err := orchestrator.Fence(ctx); err != nil { // right before the engine acts
			return orchestrator.SandboxInfo{}, fmt.Errorf("docker: create %s: %w", name, err)
		}
		resp, err := b.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
		if cerrdefs.IsConflict(err) && attempt == 0 {
			info, adopted, aerr := b.adopt(ctx, req.SandboxID, token)
			if aerr != nil || adopted {
				return info, aerr
			}
			continue // it had exited and was removed: create again
		}
		if err != nil {
			if ctx.Err() != nil { // the daemon may have created it after we gave up
				err = errors.Join(err, b.remove(ctx, name))
			}
			if cerrdefs.IsNotFound(err) {
				// The image is the one thing create can miss.
				return orchestrator.SandboxInfo{}, fmt.Errorf("docker: create %s: %w; fix: build the image with 'sage image build --tag %s' "+
					"(or 'make image'), or name an image this Docker Engine has in SAGE_AIO_IMAGE", name, err, cfg.Image)
			}
			return orchestrator.SandboxInfo{}, fmt.Errorf("docker: create %s: %w", name, err)
		}
		return b.start(ctx, resp.ID, req)
	}
}

// start starts a created container and reads its port; on failure the
// container is removed, even if ctx was cancelled.
func (b *Backend) start(ctx context.Context, id string, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	info, err := b.startAndInspect(ctx, id)
	if err != nil {
		return orchestrator.SandboxInfo{}, errors.Join(err, b.remove(ctx, id))
	}
	if info.Token == "" {
		info.Token = req.Token
	}
	return info, nil
}

func (b *Backend) startAndInspect(ctx context.Context, id string) (orchestrator.SandboxInfo, error) {
	if _, err := orchestrator.Fence(ctx); err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: start %s: %w", id, err)
	}
	if err := b.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: start %s: %w", id, err)
	}
	ins, err := b.cli.ContainerInspect(ctx, id)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("docker: inspect %s: %w", id, err)
	}
	return b.toInfo(ins)
}

// adopt takes over the container that won a name race if it runs
// (waiting briefly for its port). One that does not run (its creator
// died between create and start, or it exited) is removed, and adopted
// is false so that the caller creates a fresh one: the caller holds the
// thread's state lock, so nobody else is about to start it.
func (b *Backend) adopt(ctx context.Context, sandboxID string, token int64) (orchestrator.SandboxInfo, bool, error) {
	deadline := time.Now().Add(b.o.StartTimeout)
	for {
		ins, err := b.cli.ContainerInspect(ctx, b.Name(sandboxID))
		if cerrdefs.IsNotFound(err) {
			return orchestrator.SandboxInfo{}, false, nil
		}
		if err != nil {
			return orchestrator.SandboxInfo{}, false, fmt.Errorf("docker: inspect %s: %w", b.Name(sandboxID), err)
		}
		if ins.Config == nil || !b.ours(ins.Config.Labels) {
			return orchestrator.SandboxInfo{}, false, fmt.Errorf("docker: create %s: %w (fix: give each deployment its own container_prefix)", b.Name(sandboxID), errForeign)
		}
		if err := orchestrator.CheckFence(token, fenceOf(ins.Config.Labels), "container "+b.Name(sandboxID)); err != nil {
			return orchestrator.SandboxInfo{}, false, fmt.Errorf("docker: adopt: %w", err)
		}
		if ins.State == nil || !ins.State.Running {
			return orchestrator.SandboxInfo{}, false, b.remove(ctx, ins.ID)
		}
		info, err := b.toInfo(ins)
		if err == nil || time.Now().After(deadline) {
			return info, err == nil, err
		}
		if err := ctxsleep.Sleep(ctx, 20*time.Millisecond); err != nil {
			return orchestrator.SandboxInfo{}, false, err
		}
	}
}

// spec builds the container's configuration.
func (b *Backend) spec(req orchestrator.CreateRequest) (*container.Config, *container.HostConfig, error) {
	if req.Port <= 0 || req.Port > 65535 {
		return nil, nil, fmt.Errorf("docker: port %d out of range", req.Port)
	}
	port, err := nat.NewPort("tcp", strconv.Itoa(req.Port))
	if err != nil {
		return nil, nil, fmt.Errorf("docker: %w", err)
	}
	cfg := &container.Config{
		Image:        req.Image,
		Env:          envList(req.Env),
		ExposedPorts: nat.PortSet{port: struct{}{}},
		Labels: map[string]string{LabelManaged: "1", LabelID: req.SandboxID, LabelThread: req.ThreadID,
			LabelOwner: req.Owner, LabelPrefix: b.o.Prefix, LabelInstallation: b.o.Installation},
	}
	if req.PoolSlot != "" {
		cfg.Labels[LabelPool] = req.PoolSlot
	}
	hc := &container.HostConfig{
		PortBindings: nat.PortMap{port: []nat.PortBinding{{HostIP: b.o.HostIP, HostPort: "0"}}},
		Mounts:       binds(req),
		SecurityOpt:  []string{"no-new-privileges"},
		Init:         ptr(false),
		Runtime:      b.o.Runtime,
	}
	if b.o.Network != "" {
		hc.PortBindings, hc.NetworkMode = nil, container.NetworkMode(b.o.Network)
	}
	hc.Resources.Memory = int64(req.MemoryMB) << 20
	hc.Resources.NanoCPUs = int64(req.CPUs * 1e9)
	if b.o.PidsLimit > 0 {
		hc.Resources.PidsLimit = &b.o.PidsLimit
	}
	return cfg, hc, nil
}

func ptr[T any](v T) *T { return &v }

func binds(req orchestrator.CreateRequest) []mount.Mount {
	out := make([]mount.Mount, 0, len(req.Mounts))
	for _, m := range req.Mounts {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: m.HostPath, Target: m.SandboxPath, ReadOnly: m.ReadOnly})
	}
	return out
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// toInfo reads a running container's sandbox info: the published port,
// the labels and the API token from its environment.
func (b *Backend) toInfo(ins container.InspectResponse) (orchestrator.SandboxInfo, error) {
	info := orchestrator.SandboxInfo{ContainerID: ins.ID, ContainerName: strings.TrimPrefix(ins.Name, "/"), Backend: "docker"}
	if ins.Config != nil {
		info.SandboxID = ins.Config.Labels[LabelID]
		info.ThreadID = ins.Config.Labels[LabelThread]
		info.Owner = ins.Config.Labels[LabelOwner]
		info.Token = tokenFrom(ins.Config.Env)
		info.Fence = fenceOf(ins.Config.Labels)
		if slot := ins.Config.Labels[LabelPool]; slot != "" {
			info.PoolSlot = slot
			info.SandboxID = b.idFromName(info.ContainerName, slot)
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, ins.Created); err == nil {
		info.CreatedAt = t
	}
	if ins.NetworkSettings == nil {
		return info, fmt.Errorf("docker: container %s has no network settings", ins.ID)
	}
	if b.o.Network != "" {
		return b.networkURL(ins, info)
	}
	for _, bs := range ins.NetworkSettings.Ports {
		for _, pb := range bs {
			if pb.HostPort != "" && pb.HostPort != "0" {
				host := b.o.AdvertiseHost
				if host == "" {
					host = pb.HostIP
				}
				if host == "" || host == "0.0.0.0" {
					host = "127.0.0.1"
				}
				info.URL = "http://" + net.JoinHostPort(host, pb.HostPort)
				return info, nil
			}
		}
	}
	return info, fmt.Errorf("docker: container %s has no published port yet", ins.ID)
}

// networkURL is the sandbox's URL on Options.Network: the container's
// address there and its exposed port.
func (b *Backend) networkURL(ins container.InspectResponse, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	ep := ins.NetworkSettings.Networks[b.o.Network]
	if ep == nil || ep.IPAddress == "" {
		return info, fmt.Errorf("docker: container %s has no address on network %s yet", ins.ID, b.o.Network)
	}
	if ins.Config != nil {
		for p := range ins.Config.ExposedPorts {
			if p.Proto() == "tcp" {
				info.URL = "http://" + net.JoinHostPort(ep.IPAddress, p.Port())
				return info, nil
			}
		}
	}
	return info, fmt.Errorf("docker: container %s exposes no tcp port", ins.ID)
}

func tokenFrom(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, orchestrator.TokenEnv+"="); ok {
			return v
		}
	}
	return ""
}

// Destroy force-removes the container (by id, else by name). A container
// that is already gone is not an error. Under a thread lock
// (orchestrator.Fence) it first reads the container's fencing label and
// refuses one a newer holder made; a lock or owner lease that has ended
// refuses it right before the engine is asked.
func (b *Backend) Destroy(ctx context.Context, info orchestrator.SandboxInfo) error {
	ref := info.ContainerID
	if ref == "" {
		ref = b.Name(info.SandboxID)
	}
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return fmt.Errorf("docker: remove %s: %w", ref, err)
	}
	if token > 0 {
		ins, err := b.cli.ContainerInspect(ctx, ref)
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("docker: inspect %s: %w", ref, err)
		}
		if ins.Config != nil {
			if err := orchestrator.CheckFence(token, fenceOf(ins.Config.Labels), "container "+ref); err != nil {
				return fmt.Errorf("docker: remove: %w", err)
			}
		}
		if _, err := orchestrator.Fence(ctx); err != nil {
			return fmt.Errorf("docker: remove %s: %w", ref, err)
		}
	}
	return b.remove(ctx, ref)
}

// Adopt implements orchestrator.Adopter: it refuses a container a newer
// holder of the thread's lock made. Labels cannot change, so it stamps
// nothing: a Docker sandbox keeps its creator's token.
func (b *Backend) Adopt(ctx context.Context, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return info, fmt.Errorf("docker: adopt %s: %w", info.ContainerName, err)
	}
	if err := orchestrator.CheckFence(token, info.Fence, "container "+info.ContainerName); err != nil {
		return info, fmt.Errorf("docker: adopt: %w", err)
	}
	return info, nil
}

var _ orchestrator.Adopter = (*Backend)(nil)

// fenceOf reads a container's fencing label (0: none or unreadable).
func fenceOf(labels map[string]string) int64 {
	n, _ := strconv.ParseInt(labels[LabelFence], 10, 64)
	return n
}

func (b *Backend) remove(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := b.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return fmt.Errorf("docker: remove %s: %w", ref, err)
	}
	return nil
}

func isRemovalInProgress(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// IsAlive reports whether the container runs.
func (b *Backend) IsAlive(ctx context.Context, info orchestrator.SandboxInfo) (bool, error) {
	ref := info.ContainerID
	if ref == "" {
		ref = b.Name(info.SandboxID)
	}
	ins, err := b.cli.ContainerInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("docker: inspect %s: %w", ref, err)
	}
	return ins.State != nil && ins.State.Running, nil
}

// Discover finds the sandbox's running container by name, else by
// label, among this backend's prefix and installation only. A container
// that exists but does not run is not found.
func (b *Backend) Discover(ctx context.Context, sandboxID string) (orchestrator.SandboxInfo, bool, error) {
	ins, err := b.cli.ContainerInspect(ctx, b.Name(sandboxID))
	if cerrdefs.IsNotFound(err) {
		return b.discoverByLabel(ctx, sandboxID)
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, false, fmt.Errorf("docker: inspect %s: %w", b.Name(sandboxID), err)
	}
	if ins.Config == nil || !b.ours(ins.Config.Labels) || ins.State == nil || !ins.State.Running {
		return orchestrator.SandboxInfo{}, false, nil
	}
	info, err := b.toInfo(ins)
	return info, err == nil, err
}

func (b *Backend) discoverByLabel(ctx context.Context, sandboxID string) (orchestrator.SandboxInfo, bool, error) {
	list, err := b.list(ctx, false, filters.Arg("label", LabelID+"="+sandboxID))
	if err != nil || len(list) == 0 {
		return orchestrator.SandboxInfo{}, false, err
	}
	return list[0], true, nil
}
