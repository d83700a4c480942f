package remote

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Factory opens the driver of a remote provider from a validated Config
// whose Mode is remote.
type Factory func(ctx context.Context, cfg sandbox.Config) (sandbox.Driver, error)

var (
	mu        sync.RWMutex
	providers = map[string]Factory{}
)

func init() { sandbox.Register(sandbox.Remote, newDriver) }

// Register makes a remote provider available under name. It panics if f
// is nil or name is registered twice.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if f == nil {
		panic("remote: Register factory is nil for provider " + name)
	}
	if _, dup := providers[name]; dup {
		panic("remote: Register called twice for provider " + name)
	}
	providers[name] = f
}

// Providers lists the registered provider names, sorted.
func Providers() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(providers))
	for n := range providers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func newDriver(ctx context.Context, cfg sandbox.Config) (sandbox.Driver, error) {
	mu.RLock()
	f, ok := providers[cfg.Remote.Provider]
	mu.RUnlock()
	if !ok {
		known := "none"
		if names := Providers(); len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("remote: provider %q is not registered (known: %s)", cfg.Remote.Provider, known)
	}
	return f(ctx, cfg)
}
