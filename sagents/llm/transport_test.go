package llm

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExplicitZeroTemperatureAndExtraBodyExactJSON(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("hi"))
	c, _ := newClient(t, srv)
	r := req("hello")
	r.Temperature = ptr(float32(0))
	r.ExtraBody = map[string]any{
		"top_k":                20,
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
		"min_p":                nil, // nil optional numbers are dropped
	}
	_, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	want := `{"chat_template_kwargs":{"enable_thinking":false},"messages":[{"role":"user","content":"hello"}],` +
		`"model":"test-model","stream":false,"temperature":0,"top_k":20}`
	assert.Equal(t, want, string(srv.Last(t).Body))
}

func TestWithoutPatchBodyIsGoOpenAIs(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("hi"))
	c, _ := newClient(t, srv)
	_, err := c.Chat(ctxT(t), req("hello"))
	require.NoError(t, err)
	// go-openai's own field order: nothing was rewritten.
	assert.Equal(t, `{"model":"test-model","messages":[{"role":"user","content":"hello"}],"stream":false}`,
		string(srv.Last(t).Body))
}

func TestExplicitTopPZeroInStream(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("a"))
	c, _ := newClient(t, srv)
	r := req("x")
	r.TopP = ptr(float32(0))
	s, err := c.ChatStream(ctxT(t), r)
	require.NoError(t, err)
	_, err = s.Collect()
	require.NoError(t, err)
	assert.Equal(t, `{"messages":[{"role":"user","content":"x"}],"model":"test-model","stream":true,`+
		`"stream_options":{"include_usage":true},"top_p":0}`,
		string(srv.Last(t).Body))
}

func TestPatchApplyFillsReasoningContent(t *testing.T) {
	p := bodyPatch{fillReasoningContent: true, drop: []string{"tool_choice"}, set: map[string]any{"x": 0}}
	in := `{"messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"a"}]},` +
		`{"role":"assistant","reasoning_content":"r","tool_calls":[{"id":"b"}]}],"tool_choice":"auto"}`
	out, err := p.apply([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, `{"messages":[{"content":"q","role":"user"},{"reasoning_content":"","role":"assistant","tool_calls":[{"id":"a"}]},`+
		`{"reasoning_content":"r","role":"assistant","tool_calls":[{"id":"b"}]}],"x":0}`, string(out))
}

func TestPatchApplyRejectsNonJSON(t *testing.T) {
	_, err := bodyPatch{drop: []string{"a"}}.apply([]byte("not json"))
	assert.Error(t, err)
}

type countingTransport struct {
	n    atomic.Int32
	base http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

func TestSuppliedHTTPClientSharedByBothModels(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("a"), llmtest.Chat("b"))
	ct := &countingTransport{base: http.DefaultTransport}
	hc := &http.Client{Transport: ct}
	c, _ := newClient(t, srv, func(cfg *Config) {
		cfg.HTTPClient = hc
		cfg.Fast = ModelConfig{Model: "fast-model"}
	})
	_, err := c.Chat(ctxT(t), req("1"))
	require.NoError(t, err)
	r := req("2")
	r.ModelType = Fast
	_, err = c.Chat(ctxT(t), r)
	require.NoError(t, err)
	assert.EqualValues(t, 2, ct.n.Load())
	assert.Same(t, ct, hc.Transport, "the caller's client must not be modified")
	assert.Equal(t, "fast-model", srv.Last(t).JSON(t)["model"])
}

func TestExtraBodyReservedKey(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := newClient(t, srv)
	r := req("x")
	r.ExtraBody = map[string]any{"stream": true}
	_, err := c.Chat(ctxT(t), r)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Empty(t, srv.Requests())

	r.ExtraBody = map[string]any{"bad": make(chan int)}
	_, err = c.Chat(ctxT(t), r)
	require.ErrorAs(t, err, &ce)
}

func TestGoOpenAIValidatorRejectionIsNotRetried(t *testing.T) {
	srv := llmtest.New(t)
	c, sl := newClient(t, srv, func(cfg *Config) { cfg.Standard.Model = "o3-mini" })
	r := req("x")
	r.N = 3 // go-openai refuses n != 1 for reasoning models before sending
	_, err := c.Chat(ctxT(t), r)
	assert.ErrorIs(t, err, ErrBadRequest)
	assert.ErrorIs(t, err, openai.ErrReasoningModelLimitationsOther)
	assert.Empty(t, srv.Requests())
	assert.Empty(t, sl.got())
}
