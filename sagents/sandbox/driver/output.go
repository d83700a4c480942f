package driver

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// BoundedBuffer keeps the first and the last bytes written to it, up to a
// limit, and counts what it dropped in between. Write never blocks and
// never fails, so a chatty child is never stalled by its reader. It is safe
// for concurrent use.
type BoundedBuffer struct {
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	tail    []byte // grows to tailMax, then is used as a ring
	start   int    // index of the oldest byte in tail
	total   int64
}

// NewBoundedBuffer keeps up to limit bytes: the first half and the last
// half. A limit <= 0 keeps nothing but the count.
func NewBoundedBuffer(limit int) *BoundedBuffer {
	if limit < 0 {
		limit = 0
	}
	headMax := limit / 2
	return &BoundedBuffer{headMax: headMax, tailMax: limit - headMax}
}

// Write records p. It always returns len(p), nil.
func (b *BoundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.writeTail(p)
	return n, nil
}

func (b *BoundedBuffer) writeTail(p []byte) {
	c := b.tailMax
	if c == 0 || len(p) == 0 {
		return
	}
	if len(p) >= c {
		b.tail = append(b.tail[:0], p[len(p)-c:]...)
		b.start = 0
		return
	}
	if free := c - len(b.tail); free > 0 {
		k := min(free, len(p))
		b.tail = append(b.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // ring is full: overwrite the oldest bytes
		k := copy(b.tail[b.start:], p)
		p = p[k:]
		b.start = (b.start + k) % c
	}
}

// Skip records n bytes that were written but cannot be had (a remote
// stream that lost them). They count as dropped between head and tail:
// the head takes no more bytes, and the tail starts again after them,
// so the kept bytes never join across the gap.
func (b *BoundedBuffer) Skip(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += n
	b.headMax = len(b.head)
	b.tail, b.start = b.tail[:0], 0
}

// Total is the number of bytes written.
func (b *BoundedBuffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Dropped is the number of bytes written but not kept.
func (b *BoundedBuffer) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - int64(len(b.head)+len(b.tail))
}

// Bytes returns the kept bytes, head then tail, with nothing between.
func (b *BoundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, tail := b.parts()
	return append(append([]byte{}, head...), tail...)
}

func (b *BoundedBuffer) parts() (head, tail []byte) {
	tail = append(append([]byte{}, b.tail[b.start:]...), b.tail[:b.start]...)
	return b.head, tail
}

// Text renders the kept output. When bytes were dropped, a marker line
// says how many stand between head and tail, and the cut is moved to
// UTF-8 boundaries; dropped counts every byte not in the text but the
// marker.
func (b *BoundedBuffer) Text() (text string, dropped int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, tail := b.parts()
	dropped = b.total - int64(len(head)+len(tail))
	if dropped == 0 {
		return string(head) + string(tail), 0
	}
	h := TrimPartialRune(head)
	t := trimPartialRuneStart(tail)
	dropped += int64(len(head) - len(h) + len(tail) - len(t))
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", h, dropped, t), dropped
}

// TrimPartialRune drops an incomplete UTF-8 sequence at the end of p, so
// that output read in chunks (a background log at an offset) ends on a
// whole character.
func TrimPartialRune(p []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < utf8.RuneSelf {
			return p // ASCII: nothing open
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return p[:len(p)-i]
			}
			return p
		}
	}
	return p
}

// trimPartialRuneStart drops continuation bytes at the start of p.
func trimPartialRuneStart(p []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(p); i++ {
		if utf8.RuneStart(p[i]) {
			return p[i:]
		}
	}
	return p
}
