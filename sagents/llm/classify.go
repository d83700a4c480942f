package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		e.Message = withGatewayCause(e.Message, ex)
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
	case errors.As(err, &reqErr):
		// go-openai found no {"error": {...}} envelope: vLLM's older
		// top-level error object, {"error": "text"}, {"detail": ...}, or
		// not JSON at all. (It may wrap a half-decoded, empty APIError, so
		// this case comes first.)
		e, ok := parseErrorBody(reqErr.Body)
		if !ok {
			e = &Error{Message: bodyMessage(reqErr.Body)}
		}
		e.StatusCode, e.Err = reqErr.HTTPStatusCode, err
		return e
	case errors.As(err, &api):
		return fromAPIError(api, err)
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
		if c != 0 { // go-openai turns "code": null into 0
			e.Code = strconv.Itoa(c)
		}
		if e.StatusCode == 0 && c >= 400 && c < 600 {
			e.StatusCode = c // in-band stream errors carry the status as code
		}
	}
	return e
}

// parseErrorBody reads an error object in the shapes servers send:
// {"error": {...}} (OpenAI; Groq adds "status_code"), {"error": "text"},
// a top-level {"message", "type", "code"} (vLLM before 2025, llama.cpp's
// in-band errors), {"detail": ...} and {"message": [...]}. A numeric code
// in 400..599 is taken as the status when none is given. It reports false
// when raw holds no message and no code.
func parseErrorBody(raw []byte) (*Error, bool) { return parseErrorDepth(raw, 0) }

func parseErrorDepth(raw []byte, depth int) (*Error, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var msg string
		if json.Unmarshal(raw, &msg) != nil || msg == "" {
			return nil, false
		}
		return &Error{Message: msg}, true
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return nil, false
	}
	if inner, ok := top["error"]; ok && !isNull(inner) && depth < 3 {
		e, ok := parseErrorDepth(inner, depth+1)
		if ok {
			if e.Type == "" {
				jsonString(top["type"], &e.Type)
			}
			if e.Code == "" {
				e.Code = codeString(top["code"])
			}
			return e, true
		}
	}
	e := &Error{}
	if !jsonString(top["message"], &e.Message) {
		var parts []string
		if json.Unmarshal(top["message"], &parts) == nil {
			e.Message = strings.Join(parts, ", ")
		}
	}
	if e.Message == "" {
		if d := top["detail"]; len(d) > 0 && !jsonString(d, &e.Message) && !isNull(d) {
			e.Message = bodyMessage(d)
		}
	}
	jsonString(top["type"], &e.Type)
	jsonString(top["param"], &e.Param)
	e.Code = codeString(top["code"])
	for _, k := range []string{"status_code", "status"} {
		var n int
		if json.Unmarshal(top[k], &n) == nil && n >= 400 && n < 600 {
			e.StatusCode = n
			break
		}
	}
	if n, err := strconv.Atoi(e.Code); err == nil && e.StatusCode == 0 && n >= 400 && n < 600 {
		e.StatusCode = n
	}
	if e.Message == "" && e.Code == "" {
		return nil, false
	}
	if cause := metadataCause(top["metadata"], depth); cause != "" && !strings.Contains(e.Message, cause) {
		e.Message += ": " + cause
	}
	e.Message = truncate(e.Message)
	return e, true
}

// withGatewayCause adds to msg the cause a gateway keeps in the error
// body beside it (metadataCause), which go-openai's decoding drops.
func withGatewayCause(msg string, ex *exchange) string {
	ex.mu.Lock()
	body := ex.errBody
	ex.mu.Unlock()
	if len(body) == 0 || msg == "" {
		return msg
	}
	if pe, ok := parseErrorBody(body); ok && len(pe.Message) > len(msg) && strings.HasPrefix(pe.Message, msg+": ") {
		return pe.Message
	}
	return msg
}

// metadataCause is the cause a gateway keeps beside a generic message:
// OpenRouter's "Provider returned error" carries the upstream's own
// answer in metadata.raw (a string, or the upstream's JSON error), and the
// provider's name in metadata.provider_name.
func metadataCause(raw json.RawMessage, depth int) string {
	if len(raw) == 0 || isNull(raw) || depth >= 3 {
		return ""
	}
	var md struct {
		Raw          json.RawMessage `json:"raw"`
		ProviderName string          `json:"provider_name"`
	}
	if json.Unmarshal(raw, &md) != nil || len(md.Raw) == 0 || isNull(md.Raw) {
		return ""
	}
	var cause string
	if !jsonString(md.Raw, &cause) {
		cause = string(md.Raw)
	}
	if e, ok := parseErrorDepth([]byte(cause), depth+1); ok && e.Message != "" {
		cause = e.Message // the upstream's JSON error: its message
	}
	cause = strings.TrimSpace(cause)
	if cause == "" {
		return ""
	}
	if md.ProviderName != "" && !strings.Contains(cause, md.ProviderName) {
		cause = md.ProviderName + ": " + cause
	}
	return cause
}

// jsonString decodes raw into dst when it is a JSON string.
func jsonString(raw json.RawMessage, dst *string) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	return json.Unmarshal(raw, dst) == nil
}

// codeString is an error code given as a string or a number; null is "".
func codeString(raw json.RawMessage) string {
	var s string
	if jsonString(raw, &s) {
		return s
	}
	var n json.Number
	if len(raw) > 0 && json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// maxMessage bounds an error message kept from a server.
const maxMessage = 4 << 10

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage] + "..."
	}
	return s
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
		"context size", "exceed_context_size", "context_window_exceeded",
	}
	// Hints for errors without a status: in-band stream errors.
	rateHints        = []string{"rate limit", "rate_limit", "too many requests"}
	authHints        = []string{"api key", "api_key", "unauthorized", "unauthenticated", "authentication", "permission denied"}
	serverHints      = []string{"server_error", "server error", "overloaded", "internal error", "unavailable", "timed out", "timeout"}
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
	case e.StatusCode == 0:
		return inBandKind(text)
	case isBadRequest(e.StatusCode) && containsAny(text, unsupportedHints...):
		return KindUnsupportedParameter
	case isBadRequest(e.StatusCode):
		return KindBadRequest
	}
	return KindUnknown
}

// inBandKind classifies an error that came without an HTTP status, inside a
// 200 stream, by its words. What it does not recognise stays KindUnknown,
// which is not retried.
func inBandKind(text string) Kind {
	switch {
	case containsAny(text, rateHints...):
		return KindRateLimited
	case containsAny(text, authHints...):
		return KindAuth
	case containsAny(text, serverHints...):
		return KindServer
	case containsAny(text, unsupportedHints...):
		return KindUnsupportedParameter
	case strings.Contains(text, "invalid_request_error"):
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

// ErrStreamEvent wraps every in-band stream error: an "event: error", an
// "error:" field, or a chunk carrying "error".
var ErrStreamEvent = errors.New("llm: error event in the stream")

// streamEventError converts an in-band stream error: the data of an error
// event (enveloped in {"error": ...} or not) or a chunk's "error" value. It
// is classified by its status (Groq's status_code, a numeric code) or its
// words; an error nothing recognises is KindUnknown and not retried.
func streamEventError(raw []byte) error {
	e, ok := parseErrorBody(raw)
	if !ok {
		e = &Error{Message: bodyMessage(raw)}
	}
	e.Err = ErrStreamEvent
	e.Kind = kindOf(e)
	if e.Kind == KindUnsupportedParameter && e.Param == "" {
		e.Param = paramFromMessage(e.Message)
	}
	return e
}
