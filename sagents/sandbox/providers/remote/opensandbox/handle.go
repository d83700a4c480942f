package opensandbox

import (
	"context"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Handle is the sandbox.Handle over a Sandbox: every operation is the
// Sandbox's own method, so this adapter only adds what Handle asks for
// beyond them.
type Handle struct{ *Sandbox }

var _ sandbox.Handle = (*Handle)(nil)

// Type is sandbox.Remote.
func (h *Handle) Type() sandbox.Type { return sandbox.Remote }

// WorkspacePath is the workspace inside the sandbox.
func (h *Handle) WorkspacePath() string { return h.Workspace() }

// HostWorkspacePath is "": the workspace is not on this host.
func (h *Handle) HostWorkspacePath() string { return "" }

// VolumeMounts is nil: the remote sandbox owns its mounts.
func (h *Handle) VolumeMounts() []sandbox.VolumeMount { return nil }

// ToHostPath is unsupported: nothing maps to this host.
func (h *Handle) ToHostPath(string) (string, error) { return "", sandbox.ErrUnsupported }

// ToVirtualPath is unsupported: nothing maps from this host.
func (h *Handle) ToVirtualPath(string) (string, error) { return "", sandbox.ErrUnsupported }

// Close releases the sandbox (see Sandbox.Close); later calls return nil.
func (h *Handle) Close(ctx context.Context) error { return h.Sandbox.Close(ctx) }
