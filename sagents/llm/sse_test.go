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

func TestMalformedChunkIsServerError(t *testing.T) {
	_, err := readAllEvents("data: {not json}\n\n")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindServer, e.Kind)
}
