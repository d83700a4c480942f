package sessiond

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeFrame(&b, kindRequest, []byte(`{"op":"exec"}`)))
	require.NoError(t, writeFrame(&b, kindStdinEOF, nil))
	require.NoError(t, writeChunks(&b, kindStdout, bytes.Repeat([]byte("x"), maxChunk+10)))
	f, err := readFrame(&b)
	require.NoError(t, err)
	assert.Equal(t, wireFrame{kindRequest, []byte(`{"op":"exec"}`)}, f)
	f, err = readFrame(&b)
	require.NoError(t, err)
	assert.Equal(t, kindStdinEOF, f.Kind)
	assert.Empty(t, f.Payload)
	f, err = readFrame(&b)
	require.NoError(t, err)
	assert.Len(t, f.Payload, maxChunk, "data is split into chunks of the cap")
	f, err = readFrame(&b)
	require.NoError(t, err)
	assert.Len(t, f.Payload, 10)
	_, err = readFrame(&b)
	assert.Equal(t, io.EOF, err)
}

// A length over the kind's cap is refused from the header alone: no
// allocation, no read of the payload.
func TestFrameCaps(t *testing.T) {
	for _, c := range []struct {
		kind byte
		n    uint32
	}{{kindStdin, maxChunk + 1}, {kindStdinEOF, 1}, {kindRequest, MaxRequest + 1}, {kindResponse, 1<<32 - 1}} {
		h := []byte{c.kind, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[1:], c.n)
		r := &countingReader{r: bytes.NewReader(h)}
		_, err := readFrame(r)
		assert.ErrorIs(t, err, errFrame, "%q %d", c.kind, c.n)
		assert.Equal(t, headerSize, r.n, "only the header was read")
		assert.ErrorIs(t, writeFrame(io.Discard, c.kind, make([]byte, min(c.n, maxResponse+1))), errFrame)
	}
	_, err := readFrame(bytes.NewReader([]byte{'?', 0, 0, 0, 0}))
	assert.ErrorIs(t, err, errFrame, "unknown kind")
	_, err = readFrame(bytes.NewReader([]byte{kindStdout, 0, 0, 0, 5, 'a'}))
	assert.Equal(t, io.ErrUnexpectedEOF, err, "a payload cut short")
	_, err = readFrame(bytes.NewReader([]byte{kindStdout, 0}))
	assert.Equal(t, io.ErrUnexpectedEOF, err, "a header cut short")
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestErrorKindsRoundTrip(t *testing.T) {
	for _, sentinel := range []error{ErrSettings, ErrRefused, ErrStopped, ErrProtocol} {
		r := errorResponse(errors.Join(errors.New("context"), sentinel))
		assert.ErrorIs(t, &Error{Kind: r.Kind, Msg: r.Error}, sentinel)
	}
	r := errorResponse(errors.New("plain"))
	assert.Empty(t, r.Kind)

	// File errors: the most specific kind wins (an escape is
	// fs.ErrPermission too), and an *fs.PathError comes back whole.
	for _, c := range []struct {
		err  error
		kind string
		is   []error
	}{
		{driver.NewPathError("read", "/etc/x", sandbox.ErrEscape, "outside"), "escape", []error{sandbox.ErrEscape, fs.ErrPermission}},
		{driver.NewPathError("write", "ro/x", sandbox.ErrReadOnly, "mount"), "read_only", []error{sandbox.ErrReadOnly, fs.ErrPermission}},
		{&fs.PathError{Op: "open", Path: "/workspace/m", Err: syscall.ENOENT}, "not_exist", []error{fs.ErrNotExist}},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.EACCES}, "permission", []error{fs.ErrPermission}},
		{fmt.Errorf("task: %w", sandbox.ErrUnknownTask), "unknown_task", []error{sandbox.ErrUnknownTask, fs.ErrNotExist}},
	} {
		r := errorResponse(c.err)
		assert.Equal(t, c.kind, r.Kind, c.err)
		got := responseError(r)
		assert.Equal(t, c.err.Error(), got.Error())
		for _, sentinel := range c.is {
			assert.ErrorIs(t, got, sentinel, c.err)
		}
		var pe *fs.PathError
		assert.Equal(t, errors.As(c.err, &pe), errors.As(got, &pe), "a path error stays one: %v", c.err)
	}
}

// FuzzReadFrame: any bytes from a peer give a frame within its kind's cap
// or an error, never a panic or an allocation over the cap; a frame read
// writes back to the same bytes.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeFrame(&b, kindRequest, []byte(`{"v":1,"op":"exec","command":"true"}`))
	f.Add(b.Bytes())
	for _, req := range []string{`{"v":2,"op":"python","code":"print(1)","requirements":["x==1"],"stream":true}`,
		`{"v":2,"op":"fs","stdin":true,"fs":{"op":"write","path":"a","append":true}}`} {
		b.Reset()
		writeFrame(&b, kindRequest, []byte(req))
		writeFrame(&b, kindStdin, []byte("data"))
		writeFrame(&b, kindStdinEOF, nil)
		f.Add(b.Bytes())
	}
	b.Reset()
	writeFrame(&b, kindResponse, []byte(`{"error":"no such file or directory","kind":"not_exist","path_op":"read","path":"/workspace/x"}`))
	f.Add(b.Bytes())
	f.Add([]byte{kindStdinEOF, 0, 0, 0, 0})
	f.Add([]byte{kindStdout, 0, 0, 0, 3, 'a', 'b', 'c', kindStderr, 0, 0})
	f.Add([]byte{kindResponse, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			before := r.Len()
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if max := maxPayload(fr.Kind); max < 0 || len(fr.Payload) > max {
				t.Fatalf("frame %q of %d bytes passed its cap %d", fr.Kind, len(fr.Payload), max)
			}
			var out bytes.Buffer
			if err := writeFrame(&out, fr.Kind, fr.Payload); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), data[len(data)-before:len(data)-r.Len()]) {
				t.Fatal("a frame read does not write back to its bytes")
			}
		}
	})
}
