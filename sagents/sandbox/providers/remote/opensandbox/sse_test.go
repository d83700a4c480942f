package opensandbox

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readAll(t testing.TB, s string) ([]Event, error) {
	d := NewEventReader(strings.NewReader(s))
	var out []Event
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
	assert.Equal(t, Event{Type: EventInit, Text: "cmd-1"}, evs[0])
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
	huge := "data: {\"type\":\"stdout\",\"text\":\"" + strings.Repeat("x", MaxEventSize) + "\"}\n\n"
	_, err := readAll(t, huge)
	assert.True(t, errors.Is(err, ErrEventTooLarge), "got %v", err)
	manyLines := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", MaxEventSize/1000+2) + "\n"
	_, err = readAll(t, manyLines)
	assert.True(t, errors.Is(err, ErrEventTooLarge), "an event of many data lines is bounded too; got %v", err)
}

func FuzzEventReader(f *testing.F) {
	f.Add("data: {\"type\":\"stdout\",\"text\":\"a\"}\n\n")
	f.Add("{\"type\":\"init\",\"text\":\"x\"}\n")
	f.Add(": c\nevent: e\ndata: {\"type\":\"error\",\"error\":{\"ename\":\"E\",\"evalue\":\"1\"}}\r\n\r\n")
	f.Add("data: {\"type\":\ndata: \"ping\"}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		d := NewEventReader(strings.NewReader(s))
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
