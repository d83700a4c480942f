package opensandbox

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readAll(t testing.TB, s string) ([]event, error) {
	d := newEventReader(strings.NewReader(s))
	var out []event
	for i := 0; i < 10000; i++ {
		ev, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	t.Fatalf("decoder did not end")
	return nil, nil
}

func TestEventReader(t *testing.T) {
	stream := ": comment\n" +
		"event: message\ndata: {\"type\":\"init\",\"text\":\"cmd-1\"}\n\n" +
		"data: {\"type\":\"stdout\",\ndata: \"text\":\"a\\n\"}\r\n\r\n" +
		"{\"type\":\"stderr\",\"text\":\"bare\"}\n\n" +
		"id: 3\nretry: 10\ndata: {\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"7\"}}\n\n" +
		"data: {\"type\":\"execution_complete\",\"execution_time\":5}" // no final blank line
	evs, err := readAll(t, stream)
	require.NoError(t, err)
	require.Len(t, evs, 5)
	assert.Equal(t, event{Type: eventInit, Text: "cmd-1"}, evs[0])
	assert.Equal(t, "a\n", evs[1].Text, "data lines join with a newline")
	assert.Equal(t, "bare", evs[2].Text)
	assert.Equal(t, "7", evs[3].Error.Value)
	assert.EqualValues(t, 5, evs[4].ExecutionTime)
}

func TestEventReaderRejects(t *testing.T) {
	for name, s := range map[string]string{
		"no type":     "data: {\"text\":\"x\"}\n\n",
		"not json":    "data: hello\n\n",
		"stray line":  "hello\n\n",
		"mixed forms": "data: {\"type\":\"stdout\",\n{\"type\":\"x\"}\n",
	} {
		_, err := readAll(t, s)
		assert.Error(t, err, name)
	}
}

// TestEventReaderBoundsEvents: an event over maxEventSize, in one bare
// line (execd's form: one output line of a command becomes one event)
// or in many short data: lines, is skipped and comes back as a
// placeholder naming its type and size, and the stream goes on. Both
// oversized events are valid JSON, so without either bound they would be
// decoded whole.
func TestEventReaderBoundsEvents(t *testing.T) {
	big := "{\"type\":\"stdout\",\"text\":\"" + strings.Repeat("x", maxEventSize) + "\"}\n\n"
	var many strings.Builder
	many.WriteString("data: {\"type\":\"stderr\",\n")
	for i := 0; many.Len() < maxEventSize*6/5; i++ {
		fmt.Fprintf(&many, "data: \"k%d\":\"%s\",\n", i, strings.Repeat("y", 100))
	}
	many.WriteString("data: \"text\":\"z\"}\n\n")
	under := "{\"type\":\"stdout\",\"text\":\"" + strings.Repeat("u", maxEventSize-100) + "\"}\n\n"
	after := "{\"type\":\"execution_complete\",\"execution_time\":3}\n\n"
	evs, err := readAll(t, big+many.String()+under+after)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	assert.Equal(t, eventStdout, evs[0].Type)
	assert.Greater(t, evs[0].Oversize, int64(maxEventSize), "one bare line over the bound")
	assert.Empty(t, evs[0].Text)
	assert.Equal(t, eventStderr, evs[1].Type)
	assert.Greater(t, evs[1].Oversize, int64(maxEventSize), "many data: lines over the bound together")
	assert.Zero(t, evs[2].Oversize, "an event under the bound is decoded (the control)")
	assert.Len(t, evs[2].Text, maxEventSize-100)
	assert.Equal(t, eventComplete, evs[3].Type, "the stream goes on after an oversized event")
}

// TestEventReaderErrorObject: execd writes its JSON error object into a
// stream that has begun (status 200): recorded from the real execd for
// a second cell sent to a busy code context.
func TestEventReaderErrorObject(t *testing.T) {
	stream := "{\"type\":\"init\",\"text\":\"9652debe-7210-4cb8-b785-917bc443d59f\",\"timestamp\":1796157619883}\n\n" +
		"{\"code\":\"RUNTIME_ERROR\",\"message\":\"error running codes session is busy\"}"
	evs, err := readAll(t, stream)
	require.Len(t, evs, 1)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "RUNTIME_ERROR", ae.Code)
	assert.Equal(t, "error running codes session is busy", ae.Message)
	assert.NotContains(t, err.Error(), "without a type")
}

func FuzzEventReader(f *testing.F) {
	f.Add("data: {\"type\":\"stdout\",\"text\":\"a\"}\n\n")
	f.Add("{\"type\":\"init\",\"text\":\"x\"}\n")
	f.Add(": c\nevent: e\ndata: {\"type\":\"error\",\"error\":{\"ename\":\"E\",\"evalue\":\"1\"}}\r\n\r\n")
	f.Add("data: {\"type\":\ndata: \"ping\"}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		d := newEventReader(strings.NewReader(s))
		for i := 0; i <= len(s)+1; i++ {
			ev, err := d.Next()
			if err != nil {
				return
			}
			if ev.Type == "" {
				t.Fatalf("event without a type from %q", s)
			}
		}
		t.Fatalf("more events than bytes from %q", s)
	})
}
