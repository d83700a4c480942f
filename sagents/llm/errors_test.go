package llm

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func apiErr(status int, typ string, code any, param, msg string) error {
	e := &openai.APIError{HTTPStatusCode: status, Type: typ, Code: code, Message: msg}
	if param != "" {
		e.Param = &param
	}
	return fmt.Errorf("wrapped: %w", e)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		kind     Kind
		param    string
		sentinel error
	}{
		{"context", apiErr(400, "invalid_request_error", "context_length_exceeded", "messages",
			"This model's maximum context length is 8192 tokens."), KindContextWindow, "messages", ErrContextWindowExceeded},
		{"context vllm", apiErr(400, "BadRequestError", 400, "",
			"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"), KindContextWindow, "", ErrContextWindowExceeded},
		{"rate", apiErr(429, "requests", "rate_limit_exceeded", "", "Rate limit reached"), KindRateLimited, "", ErrRateLimited},
		{"auth", apiErr(401, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided"), KindAuth, "", ErrAuth},
		{"forbidden", apiErr(403, "", nil, "", "forbidden"), KindAuth, "", ErrAuth},
		{"bad request", apiErr(400, "invalid_request_error", nil, "temperature", "Invalid type for 'temperature'"), KindBadRequest, "temperature", ErrBadRequest},
		{"unsupported", apiErr(400, "invalid_request_error", "unsupported_parameter", "reasoning_effort",
			"Unsupported parameter: 'reasoning_effort' is not supported with this model."), KindUnsupportedParameter, "reasoning_effort", ErrUnsupportedParameter},
		{"unsupported from message", apiErr(400, "invalid_request_error", nil, "",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."), KindUnsupportedParameter, "max_tokens", ErrUnsupportedParameter},
		{"unrecognized", apiErr(400, "invalid_request_error", nil, "",
			"Unrecognized request argument supplied: top_k"), KindUnsupportedParameter, "top_k", ErrUnsupportedParameter},
		{"image", apiErr(400, "BadRequestError", nil, "", "Image input is not supported by this model"), KindUnsupportedParameter, paramImage, ErrUnsupportedParameter},
		{"server", apiErr(502, "", nil, "", "bad gateway"), KindServer, "", ErrServer},
		{"plain body", &openai.RequestError{HTTPStatusCode: 503, HTTPStatus: "503", Body: []byte("upstream down")}, KindServer, "", ErrServer},
		{"network", &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: errors.New("dial tcp: connection refused")},
			KindConnection, "", ErrConnection},
		{"local", errors.New("rejected by the client's validator"), KindBadRequest, "", ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify(tc.err, nil)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.param, e.Param)
			assert.ErrorIs(t, err, tc.sentinel)
			assert.ErrorIs(t, err, tc.err) // the cause stays reachable
		})
	}
}

func TestClassifyKeepsRetryAfterFromResponse(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "3")
	ex := &exchange{resp: &http.Response{Header: h}}
	err := classify(apiErr(429, "", nil, "", "slow"), ex)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "3s", e.RetryAfter.String())
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Kind: KindBadRequest, Model: "m", StatusCode: 400, Param: "p", Message: "nope", Attempts: 2}
	assert.Equal(t, `llm: bad request (model m): status 400: param "p": nope (after 2 attempts)`, e.Error())
}
