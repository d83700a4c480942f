package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

func init() { driver.Register(driver.Passthrough, New) }

// ErrServerProcess is returned when SAGE_SERVER_PROCESS=1.
var ErrServerProcess = errors.New("passthrough: refusing to run commands unisolated in a server process (SAGE_SERVER_PROCESS=1); use local or remote mode")

const shell = "/bin/sh"

// Sandbox is the passthrough driver.
type Sandbox struct {
	*hostkit.HostFS
	id         string
	hostWS     string
	timeout    time.Duration
	runtimeDir string
	ownRuntime bool // created for an anonymous sandbox: removed on Close
	// runtimeLock is held (flock) while an own runtime directory may
	// exist (sweep.go); nil: none.
	runtimeLock *os.File
	*hostkit.Background
}

// New creates a passthrough sandbox for cfg. The workspace is created if
// missing.
func New(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
	if os.Getenv("SAGE_SERVER_PROCESS") == "1" {
		return nil, ErrServerProcess
	}
	if cfg.Workspace == "" {
		return nil, &driver.ConfigError{Field: "sandbox.workspace", Reason: "required in passthrough mode"}
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("passthrough: workspace: %w", err)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, fmt.Errorf("passthrough: workspace: %w", err)
	}
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		return nil, fmt.Errorf("passthrough: workspace: %w", err)
	}
	virtual := cfg.VirtualWorkspace
	if virtual == "" {
		virtual = ws
	}
	mapper, err := hostkit.NewPathMapper(virtual, ws, cfg.Mounts)
	if err != nil {
		return nil, fmt.Errorf("passthrough: %w", err)
	}
	s := &Sandbox{HostFS: &hostkit.HostFS{Mapper: mapper}, id: cfg.SandboxID, hostWS: ws,
		timeout: cfg.Timeout, runtimeDir: cfg.RuntimeDir}
	if s.id == "" {
		s.id = driver.NewID("pt")
		s.ownRuntime = cfg.RuntimeDir == ""
	}
	if s.runtimeDir == "" {
		s.runtimeDir = filepath.Join(sagehome.Dir(), "runtime", s.id)
	}
	if s.ownRuntime {
		s.lockOwnRuntime()
	}
	s.Background = hostkit.NewBackground(filepath.Join(s.runtimeDir, "background"), 0)
	if len(cfg.Mounts) > 0 || virtual != ws {
		slog.Warn("passthrough sandbox: mounts and the virtual workspace apply to the file API only; commands see host paths",
			"sandbox", s.id)
	}
	return s, nil
}
