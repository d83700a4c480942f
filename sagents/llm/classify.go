package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// classify turns an error from go-openai or the network into an *Error. Context
// cancellation is returned unchanged so that callers see context.Canceled.
func classify(err error, ex *exchange) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := fromGoOpenAI(err)
	if ex != nil {
		e.RetryAfter = ex.retryAfter()
	}
	e.Kind = kindOf(e)
	if e.Kind == KindUnsupportedParameter && e.Param == "" {
		e.Param = paramFromMessage(e.Message)
	}
	return e
}

func fromGoOpenAI(err error) *Error {
	var api *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &api):
		return fromAPIError(api, err)
	case errors.As(err, &reqErr):
		return &Error{StatusCode: reqErr.HTTPStatusCode, Message: bodyMessage(reqErr.Body), Err: err}
	case isNetworkError(err):
		return &Error{Kind: KindConnection, Err: err}
	case isDecodeError(err):
		return &Error{Kind: KindServer, Message: "malformed response: " + err.Error(), Err: err}
	}
	// Anything else failed before sending, e.g. go-openai's own validator
	// (reasoning-model limits) or its message marshalling.
	return &Error{Kind: KindBadRequest, Message: err.Error(), Err: err}
}

func isNetworkError(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func isDecodeError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}

func fromAPIError(api *openai.APIError, err error) *Error {
	e := &Error{StatusCode: api.HTTPStatusCode, Message: api.Message, Type: api.Type, Err: err}
	if api.Param != nil {
		e.Param = *api.Param
	}
	switch c := api.Code.(type) {
	case string:
		e.Code = c
	case int:
		e.Code = strconv.Itoa(c)
		if e.StatusCode == 0 && c >= 400 && c < 600 {
			e.StatusCode = c // in-band stream errors carry the status as code
		}
	}
	return e
}

func bodyMessage(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}

var (
	contextWindowHints = []string{
		"context_length_exceeded", "maximum context length", "context window", "context length",
		"prompt is too long", "too many tokens", "exceeds the model's max", "input is too long",
	}
	imageHints       = []string{"image", "multimodal", "vision"}
	unsupportedHints = []string{"unsupported parameter", "unsupported_parameter", "not supported",
		"unrecognized request argument", "extra inputs are not permitted", "unknown parameter",
		"does not support", "unsupported_value"}
)

func kindOf(e *Error) Kind {
	if e.StatusCode == 0 && e.Kind != KindUnknown {
		return e.Kind // decided without a server answer
	}
	text := strings.ToLower(e.Message + " " + e.Code + " " + e.Type)
	switch {
	case containsAny(text, contextWindowHints...):
		return KindContextWindow
	case e.Code == "insufficient_quota":
		return KindQuotaExceeded
	case e.StatusCode == http.StatusTooManyRequests || e.Code == "rate_limit_exceeded":
		return KindRateLimited
	case e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden:
		return KindAuth
	case e.StatusCode == http.StatusNotFound:
		return KindNotFound
	case e.StatusCode == http.StatusRequestTimeout:
		return KindTimeout
	case e.StatusCode == http.StatusConflict:
		return KindConflict
	case e.StatusCode >= 500 || e.Type == "server_error" || e.Code == "server_error":
		return KindServer
	case isBadRequest(e.StatusCode) && containsAny(text, unsupportedHints...):
		return KindUnsupportedParameter
	case isBadRequest(e.StatusCode):
		return KindBadRequest
	}
	return KindUnknown
}

func isBadRequest(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusUnprocessableEntity
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

var paramPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)unsupported (?:parameter|value): '([A-Za-z0-9_.]+)'`),
	regexp.MustCompile(`(?i)unrecognized request arguments? supplied: ([A-Za-z0-9_.]+)`),
	regexp.MustCompile(`(?i)unknown parameter:? '?([A-Za-z0-9_.]+)`),
	regexp.MustCompile("(?i)[`'\"]([A-Za-z0-9_.]+)[`'\"] (?:is )?not supported"),
	regexp.MustCompile(`(?i)\b([a-z][a-z0-9_]*_[a-z0-9_]+) is not supported`),
}

// paramFromMessage extracts a parameter name from messages such as
// "Unsupported parameter: 'reasoning_effort' is not supported with this model."
func paramFromMessage(msg string) string {
	for _, re := range paramPatterns {
		if m := re.FindStringSubmatch(msg); m != nil {
			return m[1]
		}
	}
	if isImageComplaint(msg) {
		return paramImage
	}
	return ""
}

// paramImage is the pseudo-parameter for image parts in messages.
const paramImage = "image_url"

func isImageComplaint(msg string) bool {
	return containsAny(strings.ToLower(msg), imageHints...)
}

// parseRetryAfter reads Retry-After (seconds or an HTTP date) and OpenAI's
// retry-after-ms header.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// streamEventError converts an in-band {"error": ...} stream event.
func streamEventError(raw []byte) error {
	var api openai.APIError
	if err := api.UnmarshalJSON(raw); err != nil || api.Message == "" && api.Code == nil {
		api = openai.APIError{Message: bodyMessage(raw)}
	}
	e := fromAPIError(&api, fmt.Errorf("stream error event: %w", &api))
	e.Kind = kindOf(e)
	if e.Kind == KindUnknown {
		e.Kind = KindServer // an error inside a 200 stream is the server's failure
	}
	return e
}
