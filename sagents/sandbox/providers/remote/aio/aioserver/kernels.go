package aioserver

import (
	"context"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Languages of the code kernels.
const (
	langPython = "python"
	langJS     = "javascript"
)

// kernels are the code sessions: one kernel per language and session id,
// started on first use and closed after kernelIdle without use, when
// their interpreter died, or when the server closes.
type kernels struct {
	h  *sandbox.Sandbox
	mu sync.Mutex
	m  map[string]*kernel
}

func newKernels(h *sandbox.Sandbox) *kernels { return &kernels{h: h, m: map[string]*kernel{}} }

// get returns the session's kernel, starting one in dir when it has none
// (or its interpreter ended). fresh reports a new kernel.
func (ks *kernels) get(lang, id, dir string) (k *kernel, fresh bool, err error) {
	key := lang + "\x00" + id
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k := ks.m[key]; k != nil && k.alive() {
		return k, false, nil
	}
	delete(ks.m, key)
	ks.reapLocked()
	if len(ks.m) >= maxKernels {
		return nil, false, badArg("too many code sessions are busy; wait for one to finish")
	}
	k, err = startKernel(ks.h, lang, kernelCommand(lang), dir, true)
	if err != nil {
		return nil, false, err
	}
	ks.m[key] = k
	return k, true, nil
}

// reapLocked closes kernels that ended or sat idle past kernelIdle and,
// at the bound, the least recently used idle one.
func (ks *kernels) reapLocked() {
	var lru string
	var lruAt time.Time
	for key, k := range ks.m {
		k.mu.Lock()
		used := k.lastUsed
		k.mu.Unlock()
		if !k.alive() || time.Since(used) > kernelIdle {
			k.close()
			delete(ks.m, key)
			continue
		}
		if !k.exec.TryLock() {
			continue // executing
		}
		k.exec.Unlock()
		if lru == "" || used.Before(lruAt) {
			lru, lruAt = key, used
		}
	}
	if len(ks.m) >= maxKernels && lru != "" {
		ks.m[lru].close()
		delete(ks.m, lru)
	}
}

// drop forgets the session's kernel if it is k.
func (ks *kernels) drop(lang, id string, k *kernel) {
	key := lang + "\x00" + id
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.m[key] == k {
		delete(ks.m, key)
	}
}

// closeAll stops every kernel and waits (within ctx) for them to end.
func (ks *kernels) closeAll(ctx context.Context) {
	ks.mu.Lock()
	all := ks.m
	ks.m = map[string]*kernel{}
	ks.mu.Unlock()
	for _, k := range all {
		k.close()
	}
	for _, k := range all {
		k.wait(ctx)
	}
}
