package isolation

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// What a gVisor session's checkpoints (package local's
// checkpoint_gvisor_session_linux.go) need of its backend: the control
// socket on runsc's stdin, runsc and its flags for pause, checkpoint and
// resume, the sandbox's spec, and RestoreWrap (gvisor_linux.go).

// SetStdioControl puts a session sandbox's control socket on runsc's
// stdin instead of a descriptor donated with --pass-fd, which runsc
// restore cannot hand back. Call it before the session sandbox starts.
func (g *Gvisor) SetStdioControl() { g.stdioControl = true }

// StdioControl says whether SetStdioControl was called.
func (g *Gvisor) StdioControl() bool { return g.stdioControl }

// Network is the sandbox's network mode.
func (g *Gvisor) Network() driver.NetworkMode { return g.network }

// Runsc is the runsc binary and its global flags for this sandbox's
// state (--root and the rest of RunscFlags).
func (g *Gvisor) Runsc() (path string, flags []string) { return g.runsc, g.flags() }

// Dir is the sandbox's gVisor directory in its runtime directory (the
// state and bundles are in it; checkpoints may keep their images there).
func (g *Gvisor) Dir() string { return filepath.Dir(g.state) }

// Spec is the OCI spec (config.json) container was started with.
func (g *Gvisor) Spec(container string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(g.bundles, container, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("local: gvisor: the spec of %s: %w", container, err)
	}
	return b, nil
}
