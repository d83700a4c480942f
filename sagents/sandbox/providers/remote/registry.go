package remote

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/internal/registry"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Factory opens the driver of a remote provider from a validated Config
// whose Mode is remote.
type Factory func(ctx context.Context, cfg driver.Config) (driver.Driver, error)

// providers are the registered remote providers.
var providers = registry.New[string, Factory]("remote: Register", "provider ")

func init() { driver.Register(driver.Remote, newDriver) }

// Register makes a remote provider available under name. It panics if f
// is nil or name is registered twice.
func Register(name string, f Factory) { providers.Add(name, f) }

// Providers lists the registered provider names, sorted.
func Providers() []string { return providers.Names() }

func newDriver(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
	f, ok := providers.Get(cfg.Remote.Provider)
	if !ok {
		return nil, &driver.ConfigError{Field: "sandbox.remote.provider", Value: cfg.Remote.Provider,
			Reason: fmt.Sprintf("not a registered remote provider (known: %s)", providers.Known())}
	}
	return f(ctx, cfg)
}
