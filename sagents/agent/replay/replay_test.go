package replay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlanFollowsTheConversation(t *testing.T) {
	r := next(nil)
	assert.True(t, strings.HasPrefix(r.Text, Label), "every text is labelled as a replay")
	require.Len(t, r.Calls, 1)
	assert.Equal(t, "file_write", r.Calls[0].Name)

	r = next([]message{{Role: "user"}, {Role: "assistant"}, {Role: "tool", Name: "file_write"}})
	require.Len(t, r.Calls, 1)
	assert.Equal(t, "execute_shell_command", r.Calls[0].Name)

	r = next([]message{{Role: "assistant"}, {Role: "tool"}, {Role: "assistant"}, {Role: "tool"}})
	assert.Len(t, r.Calls, 2, "read and list at once")

	failed := []message{{Role: "assistant"}, {Role: "tool", Name: "file_write", Content: `{"success":false,"error_code":"x"}`}}
	r = next(failed)
	assert.Empty(t, r.Calls, "a failed step ends the plan")
	assert.Contains(t, r.Text, "failed")
}

// TestPlanFollowsSplitCalls: a framework that sends the two calls of one
// reply as two assistant messages (langchaingo's agents do) still gets the
// answer quoting file_read's result, not a fifth step (the control: the
// same conversation without the plan's ids is counted by assistant
// messages and loses it).
func TestPlanFollowsSplitCalls(t *testing.T) {
	calls := func(id string) []struct {
		ID string `json:"id"`
	} {
		return []struct {
			ID string `json:"id"`
		}{{ID: id}}
	}
	split := []message{{Role: "user"},
		{Role: "assistant", ToolCalls: calls("call_write")}, {Role: "tool", ToolCallID: "call_write"},
		{Role: "assistant", ToolCalls: calls("call_run")}, {Role: "tool", ToolCallID: "call_run"},
		{Role: "assistant", ToolCalls: calls("call_read")}, {Role: "tool", ToolCallID: "call_read", Content: "header\nfirst 15 Fibonacci numbers: 0 1 1"},
		{Role: "assistant", ToolCalls: calls("call_list")}, {Role: "tool", ToolCallID: "call_list", Content: "fib.py"},
	}
	r := next(split)
	assert.Empty(t, r.Calls)
	assert.Contains(t, r.Text, "first 15 Fibonacci numbers: 0 1 1")

	r = next(split[:5])
	require.Len(t, r.Calls, 2, "after the run come read and list")

	failed := append(append([]message(nil), split[:7]...), message{Role: "assistant", ToolCalls: calls("call_list")},
		message{Role: "tool", ToolCallID: "call_list", Name: "list_dir", Content: `{"success":false}`})
	r = next(failed)
	assert.Contains(t, r.Text, "list_dir call failed", "a failure in the step's split calls is seen")

	var noIDs []message
	for _, m := range split {
		m.ToolCalls, m.ToolCallID = nil, ""
		noIDs = append(noIDs, m)
	}
	r = next(noIDs)
	assert.NotContains(t, r.Text, "first 15 Fibonacci numbers", "control: counting assistant messages loses the read")
}

func TestServerSpeaksChatCompletions(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	defer s.Close()
	require.True(t, strings.HasPrefix(s.URL, "http://127.0.0.1:"), s.URL)
	body := []byte(`{"model":"` + Model + `","messages":[{"role":"user","content":"hi"}]}`)
	resp, err := http.Post(s.URL+"/chat/completions", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Choices, 1)
	assert.True(t, strings.HasPrefix(out.Choices[0].Message.Content, Label))
	assert.Equal(t, "tool_calls", out.Choices[0].FinishReason)
	require.Len(t, out.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "file_write", out.Choices[0].Message.ToolCalls[0].Function.Name)
}
