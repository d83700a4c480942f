package provisioner

import (
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Mount is one extra mount of a create request.
type Mount struct {
	HostPath      string `json:"host_path"`
	ContainerPath string `json:"container_path"`
	ReadOnly      bool   `json:"read_only,omitempty"`
}

// CreateBody is the body of POST /api/sandboxes. Image, port and
// resources are the provisioner's configuration, not the client's.
type CreateBody struct {
	SandboxID   string            `json:"sandbox_id"`
	ThreadID    string            `json:"thread_id,omitempty"`
	ExtraMounts []Mount           `json:"extra_mounts,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Token is the bearer token the sandbox's API must require.
	Token string `json:"token,omitempty"`
	// Fence is the fencing token of the client's thread lock
	// (orchestrator.Fence), put on the sandbox by backends that can.
	Fence int64 `json:"fence,omitempty"`
}

// AdoptBody is the body of POST /api/sandboxes/{id}/adopt: a client that
// takes the sandbox over under its thread lock's fencing token.
type AdoptBody struct {
	Fence int64 `json:"fence"`
}

// FenceHeader carries the fencing token of a DELETE.
const FenceHeader = "X-Sage-Fence"

// Sandbox is one sandbox as the API returns it (a superset of DeerFlow's
// {sandbox_id, sandbox_url, status}).
type Sandbox struct {
	SandboxID     string    `json:"sandbox_id"`
	URL           string    `json:"sandbox_url"`
	Status        string    `json:"status"`
	ThreadID      string    `json:"thread_id,omitempty"`
	ContainerName string    `json:"container_name,omitempty"`
	ContainerID   string    `json:"container_id,omitempty"`
	Owner         string    `json:"owner,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	Fence         int64     `json:"fence,omitempty"`
}

// SandboxList is the body of GET /api/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
	Count     int       `json:"count"`
}

// DeleteResult is the body of a successful DELETE.
type DeleteResult struct {
	OK        bool   `json:"ok"`
	SandboxID string `json:"sandbox_id"`
}

// Health is the body of GET /health.
type Health struct {
	Status  string `json:"status"`
	Backend string `json:"backend,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Detail string `json:"detail"`
	Code   string `json:"error,omitempty"`
}

// Status values of Sandbox.
const (
	StatusRunning = "Running"
)

func toWire(info orchestrator.SandboxInfo) Sandbox {
	return Sandbox{SandboxID: info.SandboxID, URL: info.URL, Status: StatusRunning, ThreadID: info.ThreadID,
		ContainerName: info.ContainerName, ContainerID: info.ContainerID, Owner: info.Owner, CreatedAt: info.CreatedAt, Fence: info.Fence}
}

func fromWire(s Sandbox) orchestrator.SandboxInfo {
	return orchestrator.SandboxInfo{SandboxID: s.SandboxID, ThreadID: s.ThreadID, URL: s.URL, ContainerName: s.ContainerName,
		ContainerID: s.ContainerID, Owner: s.Owner, CreatedAt: s.CreatedAt, Backend: BackendName, Fence: s.Fence}
}

func mountsToWire(ms []driver.VolumeMount) []Mount {
	out := make([]Mount, 0, len(ms))
	for _, m := range ms {
		out = append(out, Mount{HostPath: m.HostPath, ContainerPath: m.SandboxPath, ReadOnly: m.ReadOnly})
	}
	return out
}
