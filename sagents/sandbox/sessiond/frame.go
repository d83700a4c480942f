package sessiond

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame kinds.
const (
	kindRequest  byte = 'Q' // client: the request (JSON)
	kindStdin    byte = 'i' // client: a chunk of the command's stdin
	kindStdinEOF byte = 'I' // client: stdin is over (no payload)
	kindStdout   byte = 'o' // daemon: a chunk of the command's stdout
	kindStderr   byte = 'e' // daemon: a chunk of the command's stderr
	kindResponse byte = 'R' // daemon: the response (JSON), the last frame
)

// Size caps of a frame's payload, by kind.
const (
	MaxRequest  = 1 << 20  // a command line and its environment
	maxChunk    = 64 << 10 // one chunk of stdin, stdout or stderr
	maxResponse = 16 << 20 // a result with its captured output (1 MiB by default, JSON-escaped)
)

// headerSize is a frame's kind byte and big-endian payload length.
const headerSize = 5

// errFrame is a malformed frame: an unknown kind, or a payload over its
// kind's cap.
var errFrame = errors.New("sessiond: bad frame")

// wireFrame is one message of the protocol.
type wireFrame struct {
	Kind    byte
	Payload []byte
}

// maxPayload is the cap of kind's payload, or -1 for an unknown kind.
func maxPayload(kind byte) int {
	switch kind {
	case kindRequest:
		return MaxRequest
	case kindStdin, kindStdout, kindStderr:
		return maxChunk
	case kindStdinEOF:
		return 0
	case kindResponse:
		return maxResponse
	}
	return -1
}

// readFrame reads one frame. It refuses, before reading the payload, an
// unknown kind or a length over the kind's cap (errFrame), so a peer
// cannot make it allocate more than the cap. A clean end of the stream
// before a frame starts is io.EOF; within a frame, io.ErrUnexpectedEOF.
func readFrame(r io.Reader) (wireFrame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return wireFrame{}, err
	}
	max := maxPayload(h[0])
	if max < 0 {
		return wireFrame{}, fmt.Errorf("%w: unknown kind %#x", errFrame, h[0])
	}
	n := binary.BigEndian.Uint32(h[1:])
	if uint64(n) > uint64(max) {
		return wireFrame{}, fmt.Errorf("%w: kind %q carries %d bytes, over its cap of %d", errFrame, h[0], n, max)
	}
	f := wireFrame{Kind: h[0], Payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return wireFrame{}, err
	}
	return f, nil
}

// writeFrame writes one frame; a payload over its kind's cap is refused
// (errFrame) and nothing is written. Data longer than maxChunk must be
// split by the caller (see writeChunks).
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	max := maxPayload(kind)
	if max < 0 || len(payload) > max {
		return fmt.Errorf("%w: kind %q with %d bytes (cap %d)", errFrame, kind, len(payload), max)
	}
	buf := make([]byte, headerSize+len(payload))
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[1:], uint32(len(payload)))
	copy(buf[headerSize:], payload)
	_, err := w.Write(buf)
	return err
}

// writeChunks writes p as data frames of kind, maxChunk bytes at most each.
func writeChunks(w io.Writer, kind byte, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), maxChunk)
		if err := writeFrame(w, kind, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}
