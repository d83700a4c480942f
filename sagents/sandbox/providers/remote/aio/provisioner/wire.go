package provisioner

import (
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// wireMount is one extra mount of a create request.
type wireMount struct {
	HostPath      string `json:"host_path"`
	ContainerPath string `json:"container_path"`
	ReadOnly      bool   `json:"read_only,omitempty"`
}

// createBody is the body of POST /api/sandboxes. Image, port and
// resources are the provisioner's configuration, not the client's.
type createBody struct {
	SandboxID   string            `json:"sandbox_id"`
	ThreadID    string            `json:"thread_id,omitempty"`
	ExtraMounts []wireMount       `json:"extra_mounts,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Token is the bearer token the sandbox's API must require.
	Token string `json:"token,omitempty"`
	// Fence is the fencing token of the client's thread lock
	// (orchestrator.Fence), put on the sandbox by backends that can.
	Fence int64 `json:"fence,omitempty"`
	// PoolSlot asks for a warm-pool sandbox (its id is sandbox_id), for
	// backends that keep pools (orchestrator.Pooler).
	PoolSlot string `json:"pool_slot,omitempty"`
}

// claimBody is the body of POST /api/pool/{slot}/claim: the unclaimed
// pool sandbox {slot} becomes sandbox_id, of thread_id.
type claimBody struct {
	SandboxID string `json:"sandbox_id"`
	ThreadID  string `json:"thread_id,omitempty"`
	Fence     int64  `json:"fence,omitempty"`
}

// adoptBody is the body of POST /api/sandboxes/{id}/adopt: a client that
// takes the sandbox over under its thread lock's fencing token.
type adoptBody struct {
	Fence int64 `json:"fence"`
}

// fenceHeaderName carries the fencing token of a DELETE.
const fenceHeaderName = "X-Sage-Fence"

// wireSandbox is one sandbox as the API returns it (a superset of DeerFlow's
// {sandbox_id, sandbox_url, status}).
type wireSandbox struct {
	SandboxID     string    `json:"sandbox_id"`
	URL           string    `json:"sandbox_url"`
	Status        string    `json:"status"`
	ThreadID      string    `json:"thread_id,omitempty"`
	ContainerName string    `json:"container_name,omitempty"`
	ContainerID   string    `json:"container_id,omitempty"`
	Owner         string    `json:"owner,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	Fence         int64     `json:"fence,omitempty"`
	PoolSlot      string    `json:"pool_slot,omitempty"`
}

// wireSandboxList is the body of GET /api/sandboxes.
type wireSandboxList struct {
	Sandboxes []wireSandbox `json:"sandboxes"`
	Count     int           `json:"count"`
}

// deleteResult is the body of a successful DELETE.
type deleteResult struct {
	OK        bool   `json:"ok"`
	SandboxID string `json:"sandbox_id"`
}

// healthBody is the body of GET /health.
type healthBody struct {
	Status  string `json:"status"`
	Backend string `json:"backend,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// errorBody is the body of every error answer.
type errorBody struct {
	Detail string `json:"detail"`
	Code   string `json:"error,omitempty"`
}

// Status values of wireSandbox.
const (
	statusRunning = "Running"
)

func toWire(info orchestrator.SandboxInfo) wireSandbox {
	return wireSandbox{SandboxID: info.SandboxID, URL: info.URL, Status: statusRunning, ThreadID: info.ThreadID,
		ContainerName: info.ContainerName, ContainerID: info.ContainerID, Owner: info.Owner, CreatedAt: info.CreatedAt, Fence: info.Fence, PoolSlot: info.PoolSlot}
}

func fromWire(s wireSandbox) orchestrator.SandboxInfo {
	return orchestrator.SandboxInfo{SandboxID: s.SandboxID, ThreadID: s.ThreadID, URL: s.URL, ContainerName: s.ContainerName,
		ContainerID: s.ContainerID, Owner: s.Owner, CreatedAt: s.CreatedAt, Backend: backendName, Fence: s.Fence, PoolSlot: s.PoolSlot}
}

func mountsToWire(ms []driver.VolumeMount) []wireMount {
	out := make([]wireMount, 0, len(ms))
	for _, m := range ms {
		out = append(out, wireMount{HostPath: m.HostPath, ContainerPath: m.SandboxPath, ReadOnly: m.ReadOnly})
	}
	return out
}
