package orchestrator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Lister is implemented by state stores that can enumerate their threads
// (FileStore and the redis store do); `sage sandbox ls` uses it.
type Lister interface {
	List(ctx context.Context) (map[string]SandboxInfo, error)
}

// BackendFactory builds a Backend from the provider_config map (the keys
// of ProviderConfig plus whatever the backend reads itself).
type BackendFactory func(cfg map[string]any) (Backend, error)

// StoreFactory builds a StateStore; addr is the store's address (a
// directory for "file", a redis:// URL for "redis").
type StoreFactory func(addr string) (StateStore, error)

var (
	regMu    sync.RWMutex
	backends = map[string]BackendFactory{}
	stores   = map[string]StoreFactory{"file": func(addr string) (StateStore, error) { return NewFileStore(addr), nil }}
)

// RegisterBackend makes a backend available to the orchestrating provider
// under name, as database/sql drivers do. Backend packages call it from
// init:
//
//	func init() { orchestrator.RegisterBackend("docker", newFromConfig) }
//
// Import the package (for its side effect) to use it:
// ".../aio/dockerbackend" registers "docker", the provisioner client
// registers "provisioner". It panics on a nil factory or a duplicate name.
func RegisterBackend(name string, f BackendFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("aio: RegisterBackend factory is nil for " + name)
	}
	if _, dup := backends[name]; dup {
		panic("aio: RegisterBackend called twice for " + name)
	}
	backends[name] = f
}

// RegisterStateStore makes a state store available under name ("file" is
// built in; ".../aio/redisstore" registers "redis"). It panics on a nil
// factory or a duplicate name.
func RegisterStateStore(name string, f StoreFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("aio: RegisterStateStore factory is nil for " + name)
	}
	if _, dup := stores[name]; dup {
		panic("aio: RegisterStateStore called twice for " + name)
	}
	stores[name] = f
}

// NewBackend builds the backend registered under name.
func NewBackend(name string, cfg map[string]any) (Backend, error) {
	regMu.RLock()
	f, ok := backends[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("aio: backend %q is not registered (known: %s; import its package, e.g. _ \"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend\")", name, known(backends))
	}
	return f(cfg)
}

// NewStateStore builds the state store registered under name.
func NewStateStore(name, addr string) (StateStore, error) {
	regMu.RLock()
	f, ok := stores[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("aio: state store %q is not registered (known: %s; import _ \"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore\" for redis)", name, known(stores))
	}
	return f(addr)
}

func known[F any](m map[string]F) string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
