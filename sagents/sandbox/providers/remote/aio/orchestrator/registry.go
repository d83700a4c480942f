package orchestrator

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/internal/registry"
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
	backends = registry.New[string, BackendFactory]("aio: RegisterBackend", "")
	stores   = registry.New[string, StoreFactory]("aio: RegisterStateStore", "")
)

func init() {
	RegisterStateStore("file", func(addr string) (StateStore, error) { return NewFileStore(addr), nil })
}

// RegisterBackend makes a backend available to the orchestrating provider
// under name, as database/sql drivers do. Backend packages call it from
// init:
//
//	func init() { orchestrator.RegisterBackend("docker", newFromConfig) }
//
// Import the package (for its side effect) to use it:
// ".../aio/dockerbackend" registers "docker", the provisioner client
// registers "provisioner". It panics on a nil factory or a duplicate name.
func RegisterBackend(name string, f BackendFactory) { backends.Add(name, f) }

// RegisterStateStore makes a state store available under name ("file" is
// built in; ".../aio/redisstore" registers "redis"). It panics on a nil
// factory or a duplicate name.
func RegisterStateStore(name string, f StoreFactory) { stores.Add(name, f) }

// NewBackend builds the backend registered under name.
func NewBackend(name string, cfg map[string]any) (Backend, error) {
	f, ok := backends.Get(name)
	if !ok {
		return nil, fmt.Errorf("aio: backend %q is not registered (known: %s; import its package, e.g. _ \"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend\")", name, backends.Known())
	}
	return f(cfg)
}

// NewStateStore builds the state store registered under name.
func NewStateStore(name, addr string) (StateStore, error) {
	f, ok := stores.Get(name)
	if !ok {
		return nil, fmt.Errorf("aio: state store %q is not registered (known: %s; import _ \"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore\" for redis)", name, stores.Known())
	}
	return f(addr)
}
