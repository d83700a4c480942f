package testenv

import (
	"bytes"
	"sync"
)

// Buffer collects what a child process, a handler or a timer goroutine
// writes while the test reads it: a bytes.Buffer whose Write and String
// are safe to call concurrently.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
