package llm

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAllEvents runs the SSE reader, decoder and assembler over a raw body.
func readAllEvents(body string) (*Response, error) {
	s := &Stream{sse: newSSEReader(strings.NewReader(body)), cancel: func() {}}
	for {
		_, err := s.fetch()
		if err == io.EOF {
			return s.asm.response(), nil
		}
		if err != nil {
			return s.asm.response(), err
		}
	}
}

func TestSSEFraming(t *testing.T) {
	body := ": comment\r\n" +
		"event: message\r\ndata: one\r\n\r\n" +
		"id: 7\nretry: 10\ndata:two\ndata: lines\n\n" +
		"data\n\n" + // a field with no colon is an empty data field
		"event: error\ndata: {\"e\":1}\n\n" +
		"data: last-without-blank-line"
	r := newSSEReader(strings.NewReader(body))
	type ev struct {
		data string
		err  bool
	}
	var got []ev
	for {
		d, e, err := r.next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, ev{string(d), e})
	}
	assert.Equal(t, []ev{{"one", false}, {"two\nlines", false}, {"", false}, {`{"e":1}`, true}, {"last-without-blank-line", false}}, got)
}

func TestSSELongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	r := newSSEReader(strings.NewReader("data: " + long + "\n\n"))
	d, _, err := r.next()
	require.NoError(t, err)
	assert.Len(t, d, len(long))
}

func TestSSEEventTooLarge(t *testing.T) {
	r := newSSEReader(io.MultiReader(strings.NewReader("data: "), strings.NewReader(strings.Repeat("x", maxEventSize+10))))
	_, _, err := r.next()
	assert.ErrorIs(t, err, ErrEventTooLarge)
}

// endlessDataLines is a server that sends short "data:" lines of one event,
// never the blank line that would end it, up to four times the bound (so
// that a reader without the bound fails the test instead of exhausting
// memory); it counts what was read.
type endlessDataLines struct{ n int }

func (e *endlessDataLines) Read(p []byte) (int, error) {
	const line = "data: " + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "\n"
	if e.n >= 4*maxEventSize {
		return 0, io.EOF
	}
	n := 0
	for n+len(line) <= len(p) {
		n += copy(p[n:], line)
	}
	e.n += n
	return n, nil
}

// TestSSEEventBoundSpansLines bounds one event however it is split: every
// line is short (the line bound never trips), so only the event's
// accumulated size can stop a server that never ends it. The reader must
// stop near the bound, not read on until memory runs out.
func TestSSEEventBoundSpansLines(t *testing.T) {
	src := &endlessDataLines{}
	_, _, err := newSSEReader(src).next()
	require.ErrorIs(t, err, ErrEventTooLarge)
	assert.Less(t, src.n, maxEventSize+maxEventSize/8, "read %d bytes before giving up", src.n)

	// Control: an event just under the bound, split the same way, is
	// delivered whole, newlines included.
	line := strings.Repeat("y", 1023)
	var b strings.Builder
	for b.Len() < maxEventSize-2*len(line) {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	d, _, err := newSSEReader(strings.NewReader(b.String())).next()
	require.NoError(t, err)
	assert.Equal(t, strings.Count(b.String(), "data: "), strings.Count(string(d), "\n")+1)
}

func TestMalformedChunkIsServerError(t *testing.T) {
	_, err := readAllEvents("data: {not json}\n\n")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindServer, e.Kind)
}
