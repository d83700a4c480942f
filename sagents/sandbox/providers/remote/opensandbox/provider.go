package opensandbox

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// providerName is the remote provider name this package registers.
const providerName = "opensandbox"

func init() { remote.Register(providerName, newFromConfig) }

// newFromConfig opens the sandbox of thread cfg.SandboxID (or
// provider_config thread_id; none: an anonymous sandbox deleted at
// Close).
func newFromConfig(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
	if len(cfg.Mounts) > 0 {
		return nil, &driver.ConfigError{Field: "sandbox.mounts", Reason: "not supported by the opensandbox provider (the remote sandbox owns its mounts)"}
	}
	c, err := configFrom(cfg.Remote, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if cfg.SandboxID != "" {
		c.Thread = cfg.SandboxID
		if _, set := cfg.Remote.ProviderConfig[keyShutdownPolicy]; !set {
			c.Keep = true
		}
	}
	c.Timeout = cfg.Timeout
	if c.Thread != "" {
		// The aio provider's file store: a flock per thread under
		// $SAGE_HOME/opensandbox/threads/<thread>.
		c.Locker = orchestrator.NewFileStore(filepath.Join(sagehome.Dir(), "opensandbox"))
	}
	s, err := open(ctx, c)
	if err != nil {
		return nil, err
	}
	return &osDriver{s}, nil
}
