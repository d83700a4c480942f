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
