// Package registry is the table of named factories behind driver.Register
// (modes), remote.Register (remote providers) and the AIO orchestrator's
// backends and state stores: filled from init functions, as database/sql's
// drivers are, then looked up by name.
package registry

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Registry maps names to factories of type F. The zero value is not
// usable: make one with New. It is safe for concurrent use.
type Registry[K ~string, F any] struct {
	register string // what Add's panics name: "sandbox: Register"
	kind     string // what a name is: "mode ", "provider ", ""
	mu       sync.RWMutex
	m        map[K]F
}

// New returns an empty registry. register and kind word Add's panics:
// "{register} factory is nil for {kind}{name}".
func New[K ~string, F any](register, kind string) *Registry[K, F] {
	return &Registry[K, F]{register: register, kind: kind, m: map[K]F{}}
}

// Add registers f under name. It panics if f is nil or name is taken.
func (r *Registry[K, F]) Add(name K, f F) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := reflect.ValueOf(&f).Elem(); !v.IsValid() || (v.Kind() == reflect.Func || v.Kind() == reflect.Interface) && v.IsNil() {
		panic(r.register + " factory is nil for " + r.kind + string(name))
	}
	if _, dup := r.m[name]; dup {
		panic(r.register + " called twice for " + r.kind + string(name))
	}
	r.m[name] = f
}

// Get returns the factory registered under name.
func (r *Registry[K, F]) Get(name K) (F, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

// Names lists the registered names, sorted.
func (r *Registry[K, F]) Names() []K {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Known lists the registered names for an error message: "a, b", or
// "none".
func (r *Registry[K, F]) Known() string {
	names := r.Names()
	if len(names) == 0 {
		return "none"
	}
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
