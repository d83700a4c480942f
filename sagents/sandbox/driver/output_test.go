package driver

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestBoundedBufferKeepsAllUnderLimit(t *testing.T) {
	b := NewBoundedBuffer(10)
	b.Write([]byte("hello"))
	b.Write([]byte("world"))
	text, dropped := b.Text()
	assert.Equal(t, "helloworld", text)
	assert.Zero(t, dropped)
	assert.EqualValues(t, 10, b.Total())
}

func TestBoundedBufferHeadAndTail(t *testing.T) {
	b := NewBoundedBuffer(8)
	for _, chunk := range []string{"abc", "defgh", "ijklmnop", "qr", "stuvwxyz"} {
		n, err := b.Write([]byte(chunk))
		assert.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, "abcdwxyz", string(b.Bytes()))
	assert.EqualValues(t, 26-8, b.Dropped())
	text, dropped := b.Text()
	assert.Equal(t, "abcd\n[... 18 bytes omitted ...]\nwxyz", text)
	assert.EqualValues(t, 18, dropped)
}

func TestBoundedBufferZeroLimit(t *testing.T) {
	b := NewBoundedBuffer(0)
	b.Write([]byte("abc"))
	assert.EqualValues(t, 3, b.Dropped())
	assert.Empty(t, b.Bytes())
}

func TestBoundedBufferCutsAtRuneBoundaries(t *testing.T) {
	b := NewBoundedBuffer(8)
	b.Write([]byte(strings.Repeat("é", 20))) // 2 bytes each
	text, dropped := b.Text()
	head, tail, ok := strings.Cut(text, "\n[...")
	assert.True(t, ok)
	assert.True(t, utf8.ValidString(head) && utf8.ValidString(tail), "%q", text)
	assert.EqualValues(t, 40-len(head)-len(tail[strings.Index(tail, "]\n")+2:]), dropped)
}

func FuzzBoundedBuffer(f *testing.F) {
	f.Add([]byte("hello world"), 4, 3)
	f.Add([]byte{}, 0, 1)
	f.Add(bytes.Repeat([]byte("ü"), 50), 7, 5)
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk int) {
		limit, chunk = limit%4096, chunk%512
		if limit < 0 {
			limit = -limit
		}
		if chunk <= 0 {
			chunk = 1
		}
		b := NewBoundedBuffer(limit)
		for rest := data; len(rest) > 0; {
			k := min(chunk, len(rest))
			b.Write(rest[:k])
			rest = rest[k:]
		}
		head, tail := limit/2, limit-limit/2
		var want []byte
		if len(data) <= limit {
			want = data
		} else {
			want = append(append([]byte{}, data[:head]...), data[len(data)-tail:]...)
		}
		if got := b.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("kept %q, want %q", got, want)
		}
		if b.Dropped() != int64(len(data)-len(want)) {
			t.Fatalf("dropped %d, want %d", b.Dropped(), len(data)-len(want))
		}
		text, dropped := b.Text()
		if dropped == 0 && text != string(data) {
			t.Fatalf("nothing dropped but text %q != %q", text, data)
		}
		if dropped < b.Dropped() {
			t.Fatalf("text reports %d dropped, buffer %d", dropped, b.Dropped())
		}
	})
}

func TestBoundedBufferSkip(t *testing.T) {
	b := NewBoundedBuffer(8)
	b.Write([]byte("ab"))
	b.Skip(100)
	b.Write([]byte("cdefghij"))
	text, dropped := b.Text()
	assert.Equal(t, "ab\n[... 104 bytes omitted ...]\nghij", text, "the head stops at the gap, the tail is what came after it")
	assert.EqualValues(t, 104, dropped)
	assert.EqualValues(t, 110, b.Total())
	c := NewBoundedBuffer(8)
	c.Write([]byte("ab"))
	c.Skip(0)
	c.Write([]byte("cd"))
	text, dropped = c.Text()
	assert.Equal(t, "abcd", text, "skipping nothing changes nothing (the control)")
	assert.Zero(t, dropped)
}
