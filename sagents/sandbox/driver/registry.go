package driver

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/internal/registry"
)

// Factory opens the Driver of a mode for a validated Config.
type Factory func(ctx context.Context, cfg Config) (Driver, error)

// modes are the registered modes.
var modes = registry.New[Type, Factory]("sandbox: Register", "mode ")

// Register makes a mode available to sandbox.New. It panics if f is nil or the
// mode is registered twice, as database/sql.Register does. Providers call
// it from init.
func Register(mode Type, f Factory) { modes.Add(mode, f) }

// Modes lists the registered modes, sorted.
func Modes() []Type { return modes.Names() }

// Lookup returns the Factory registered for mode (sandbox.New calls it).
// An unregistered mode is an error listing the known ones.
func Lookup(mode Type) (Factory, error) {
	f, ok := modes.Get(mode)
	if !ok {
		return nil, fmt.Errorf("sandbox: mode %q is not registered (known: %s); import its provider package",
			mode, modes.Known())
	}
	return f, nil
}
