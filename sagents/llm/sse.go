package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEventSize bounds one SSE event so a broken server cannot exhaust memory.
const maxEventSize = 16 << 20

// ErrEventTooLarge is returned for an SSE event above 16 MiB.
var ErrEventTooLarge = errors.New("llm: stream event too large")

// sseReader parses text/event-stream framing: "data:" lines (joined with
// "\n" when an event has several), "event:" names, ":" comments and
// keep-alives, and blank lines that end events. A non-standard "error:"
// field (llama.cpp's server before late 2025) makes its value the data of an
// error event. CRLF line endings are
// accepted and a final event without its blank line is still delivered.
type sseReader struct {
	r      *bufio.Reader
	data   []byte // the current event's data, reused
	long   []byte // scratch for lines longer than the bufio buffer
	errEvt bool   // the current event is named "error"
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10)}
}

var (
	fieldData  = []byte("data")
	fieldEvent = []byte("event")
	nameError  = []byte("error")
)

// next returns the data of the next event, valid until the following call,
// and whether the event was named "error". It returns io.EOF at the end.
func (s *sseReader) next() ([]byte, bool, error) {
	s.data, s.errEvt = s.data[:0], false
	has := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && has {
				return s.data, s.errEvt, nil
			}
			return nil, false, err
		}
		if len(line) == 0 {
			if has {
				return s.data, s.errEvt, nil
			}
			s.errEvt = false
			continue
		}
		if line[0] == ':' {
			continue // comment or keep-alive
		}
		if err := s.field(line, &has); err != nil {
			return nil, false, err
		}
	}
}

func (s *sseReader) field(line []byte, has *bool) error {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch {
	case bytes.Equal(name, fieldData), bytes.Equal(name, nameError):
		if bytes.Equal(name, nameError) {
			s.errEvt = true
		}
		if *has {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > maxEventSize {
			return ErrEventTooLarge
		}
		s.data = append(s.data, value...)
		*has = true
	case bytes.Equal(name, fieldEvent):
		s.errEvt = bytes.Equal(value, nameError)
	}
	return nil
}

// readLine returns one line without its line ending. A last line without a
// newline is returned before io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
			if len(s.long) > maxEventSize {
				return nil, ErrEventTooLarge
			}
		}
		line = s.long
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
