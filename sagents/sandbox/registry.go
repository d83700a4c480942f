package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory opens the Driver of a mode for a validated Config.
type Factory func(ctx context.Context, cfg Config) (Driver, error)

var (
	registryMu sync.RWMutex
	factories  = map[Type]Factory{}
)

// Register makes a mode available to New. It panics if f is nil or the
// mode is registered twice, as database/sql.Register does. Providers call
// it from init.
func Register(mode Type, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if f == nil {
		panic("sandbox: Register factory is nil for mode " + string(mode))
	}
	if _, dup := factories[mode]; dup {
		panic("sandbox: Register called twice for mode " + string(mode))
	}
	factories[mode] = f
}

// Modes lists the registered modes, sorted.
func Modes() []Type {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Type, 0, len(factories))
	for m := range factories {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// factory returns the Factory registered for mode. An unregistered mode is
// an error listing the known ones.
func factory(mode Type) (Factory, error) {
	registryMu.RLock()
	f, ok := factories[mode]
	registryMu.RUnlock()
	if !ok {
		known := make([]string, 0)
		for _, m := range Modes() {
			known = append(known, string(m))
		}
		return nil, fmt.Errorf("sandbox: mode %q is not registered (known: %s); import its provider package",
			mode, strings.Join(known, ", "))
	}
	return f, nil
}
