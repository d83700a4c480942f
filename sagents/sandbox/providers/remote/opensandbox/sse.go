package opensandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize bounds one server-sent event (all its data lines).
const MaxEventSize = 1 << 20

// ErrEventTooLarge is returned by EventReader.Next for an event over
// MaxEventSize.
var ErrEventTooLarge = errors.New("opensandbox: server-sent event larger than 1 MiB")

// Event is one execd stream event.
type Event struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp,omitempty"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *EventError    `json:"error,omitempty"`
}

// EventError is the error carried by an "error" event.
type EventError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback,omitempty"`
}

// The event types execd sends.
const (
	EventInit     = "init"
	EventStatus   = "status"
	EventFailed   = "error"
	EventStdout   = "stdout"
	EventStderr   = "stderr"
	EventResult   = "result"
	EventComplete = "execution_complete"
	EventCount    = "execution_count"
	EventPing     = "ping"
)

// EventReader decodes an execd event stream. It reads standard SSE
// ("data:" lines, an empty line ending the event; "event:", "id:",
// "retry:" and comments are ignored) and also the bare form execd
// writes, one JSON object per line.
type EventReader struct {
	r   *bufio.Reader
	buf bytes.Buffer
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event, or io.EOF at the end of the stream.
func (d *EventReader) Next() (Event, error) {
	d.buf.Reset()
	for {
		line, err := d.line()
		if err != nil && err != io.EOF {
			return Event{}, err
		}
		eof := err == io.EOF
		switch {
		case len(line) == 0:
			if d.buf.Len() > 0 {
				return d.decode()
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if d.buf.Len() > 0 {
				d.buf.WriteByte('\n')
			}
			if d.buf.Len()+len(v) > MaxEventSize {
				return Event{}, ErrEventTooLarge
			}
			d.buf.Write(v)
		case line[0] == '{':
			if d.buf.Len() > 0 {
				return Event{}, errors.New("opensandbox: event stream mixes data: lines and bare JSON")
			}
			d.buf.Write(line)
			return d.decode()
		case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")),
			bytes.HasPrefix(line, []byte("retry:")):
		default:
			return Event{}, fmt.Errorf("opensandbox: bad event stream line %.40q", line)
		}
		if eof {
			if d.buf.Len() > 0 {
				return d.decode()
			}
			return Event{}, io.EOF
		}
	}
}

// line reads one line without its end, at most MaxEventSize bytes.
func (d *EventReader) line() ([]byte, error) {
	var out []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		if len(out)+len(chunk) > MaxEventSize+2 {
			return nil, ErrEventTooLarge
		}
		out = append(out, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		out = bytes.TrimSuffix(out, []byte("\n"))
		out = bytes.TrimSuffix(out, []byte("\r"))
		return out, err
	}
}

func (d *EventReader) decode() (Event, error) {
	var ev Event
	if err := json.Unmarshal(d.buf.Bytes(), &ev); err != nil {
		return Event{}, fmt.Errorf("opensandbox: bad event %.60q: %w", d.buf.Bytes(), err)
	}
	if ev.Type == "" {
		return Event{}, fmt.Errorf("opensandbox: event without a type: %.60q", d.buf.Bytes())
	}
	return ev, nil
}
