package opensandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
)

// maxEventSize bounds one server-sent event (all its data lines, or one
// bare JSON line).
const maxEventSize = 1 << 20

// errEventTooLarge is what an oversized event would have been decoded
// into: eventReader.Next skips such an event and returns a placeholder
// with Oversize set, so one huge output line does not end the stream.
var errEventTooLarge = errors.New("opensandbox: server-sent event larger than 1 MiB")

// event is one execd stream event.
type event struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp,omitempty"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *eventError    `json:"error,omitempty"`
	// Oversize is set on the placeholder of an event over maxEventSize
	// that was skipped: its size in bytes. Only Type (when the event's
	// start names it) is kept.
	Oversize int64 `json:"-"`
}

// eventError is the error carried by an "error" event.
type eventError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback,omitempty"`
}

// The event types execd sends.
const (
	eventInit     = "init"
	eventStatus   = "status"
	eventFailed   = "error"
	eventStdout   = "stdout"
	eventStderr   = "stderr"
	eventResult   = "result"
	eventComplete = "execution_complete"
	eventCount    = "execution_count"
	eventPing     = "ping"
)

// eventReader decodes an execd event stream. It reads the bare form
// execd writes (one JSON object per line, events apart by an empty
// line) and standard SSE ("data:" lines, an empty line ending the event;
// "event:", "id:", "retry:" and comments are ignored).
//
// execd answers a failure that happens after the stream began with its
// JSON error object ({"code":..., "message":...}) inside the 200 stream;
// Next returns it as an *APIError.
type eventReader struct {
	r   *bufio.Reader
	buf bytes.Buffer
}

// newEventReader reads events from r.
func newEventReader(r io.Reader) *eventReader {
	return &eventReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event, or io.EOF at the end of the stream. An
// event over maxEventSize comes back as a placeholder with Oversize set
// (the reader goes on after it).
func (d *eventReader) Next() (event, error) {
	d.buf.Reset()
	var over int64 // size of the data lines of an oversized event so far
	var overType string
	for {
		line, size, err := d.line()
		if err != nil && err != io.EOF {
			return event{}, err
		}
		eof := err == io.EOF
		switch {
		case size == 0:
			if over > 0 {
				return event{Type: overType, Oversize: over}, nil
			}
			if d.buf.Len() > 0 {
				return d.decode()
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			if over > 0 || size > maxEventSize || int64(d.buf.Len())+size > maxEventSize {
				if over == 0 {
					overType = eventType(append(d.buf.Bytes(), bytes.TrimPrefix(line[5:], []byte(" "))...))
					over = int64(d.buf.Len())
					d.buf.Reset()
				}
				over += size
				break
			}
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if d.buf.Len() > 0 {
				d.buf.WriteByte('\n')
			}
			d.buf.Write(v)
		case line[0] == '{':
			if d.buf.Len() > 0 || over > 0 {
				return event{}, errors.New("opensandbox: event stream mixes data: lines and bare JSON")
			}
			if size > maxEventSize {
				return event{Type: eventType(line), Oversize: size}, nil
			}
			d.buf.Write(line)
			return d.decode()
		case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")),
			bytes.HasPrefix(line, []byte("retry:")):
		default:
			return event{}, fmt.Errorf("opensandbox: bad event stream line %.40q", line)
		}
		if eof {
			if over > 0 {
				return event{Type: overType, Oversize: over}, nil
			}
			if d.buf.Len() > 0 {
				return d.decode()
			}
			return event{}, io.EOF
		}
	}
}

// maxKept is how much of a line over maxEventSize line keeps (enough
// to read the event's type).
const maxKept = 256

// line reads one line without its end and returns it with its size. A
// line over maxEventSize is read to its end but only its first maxKept
// bytes are returned.
func (d *eventReader) line() ([]byte, int64, error) {
	var out []byte
	var size int64
	for {
		chunk, err := d.r.ReadSlice('\n')
		size += int64(len(chunk))
		if size <= maxEventSize+2 {
			out = append(out, chunk...)
		} else if len(out) < maxKept {
			out = append(out, chunk[:min(len(chunk), maxKept-len(out))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if size <= maxEventSize+2 {
			out = bytes.TrimSuffix(out, []byte("\n"))
			out = bytes.TrimSuffix(out, []byte("\r"))
			size = int64(len(out))
		}
		return out, size, err
	}
}

// typePrefix reads the type of an event from its start: execd writes
// "type" first.
var typePrefix = regexp.MustCompile(`^\{\s*"type"\s*:\s*"([a-z_]{1,40})"`)

func eventType(start []byte) string {
	if m := typePrefix.FindSubmatch(start); m != nil {
		return string(m[1])
	}
	return ""
}

func (d *eventReader) decode() (event, error) {
	var ev event
	if err := json.Unmarshal(d.buf.Bytes(), &ev); err != nil {
		return event{}, fmt.Errorf("opensandbox: bad event %.60q: %w", d.buf.Bytes(), err)
	}
	if ev.Type == "" {
		var e struct{ Code, Message string }
		if json.Unmarshal(d.buf.Bytes(), &e) == nil && e.Code != "" {
			return event{}, &APIError{Op: "event stream", Status: http.StatusOK, Code: e.Code, Message: e.Message}
		}
		return event{}, fmt.Errorf("opensandbox: event without a type: %.60q", d.buf.Bytes())
	}
	return ev, nil
}
