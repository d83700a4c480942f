package opensandboxtest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func request(t *testing.T, method, target, body string) (*http.Request, []byte) {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r, []byte(body)
}

const goodCreate = `{"image":{"uri":"img"},"entrypoint":["/bin/sh"],"resourceLimits":{"cpu":"1"}}`

// TestSpecCatchesBadRequests is the control of the OpenAPI check: a
// valid request passes, and an unknown field, a missing required field or
// a relative path is reported.
func TestSpecCatchesBadRequests(t *testing.T) {
	sp, err := LoadSpec()
	require.NoError(t, err)
	_, err = sp.CheckRequest(request(t, http.MethodPost, "/v1/sandboxes", goodCreate))
	require.NoError(t, err)
	_, err = sp.CheckRequest(request(t, http.MethodPost, "/command", `{"command":"ls","cwd":"/tmp"}`))
	require.NoError(t, err)

	for name, c := range map[string]struct{ method, target, body, want string }{
		"unknown field": {http.MethodPost, "/v1/sandboxes",
			`{"image":{"uri":"img"},"entrypoint":["/bin/sh"],"resourceLimits":{},"labels":{}}`, "labels"},
		"missing required":   {http.MethodPost, "/command", `{"cwd":"/tmp"}`, "command"},
		"relative cwd":       {http.MethodPost, "/command", `{"command":"ls","cwd":"tmp"}`, "cwd"},
		"timeout too short":  {http.MethodPost, "/v1/sandboxes", `{"image":{"uri":"i"},"entrypoint":["x"],"resourceLimits":{},"timeout":5}`, "timeout"},
		"relative path":      {http.MethodGet, "/files/download?path=a.txt", ``, "path"},
		"unknown operation":  {http.MethodPost, "/files/replace", `{}`, "not an operation"},
		"wrong element type": {http.MethodPost, "/files/mv", `[{"src":"/a","dest":3}]`, "dest"},
	} {
		_, err := sp.CheckRequest(request(t, c.method, c.target, c.body))
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.want, name)
		}
	}
}

// TestSpecCatchesBadAnswers: a Sandbox with an extra field, a stream
// where none is documented and a malformed stream event are reported.
func TestSpecCatchesBadAnswers(t *testing.T) {
	sp, err := LoadSpec()
	require.NoError(t, err)
	in, err := sp.CheckRequest(request(t, http.MethodGet, "/v1/sandboxes/s1", ""))
	require.NoError(t, err)
	js := http.Header{"Content-Type": {"application/json"}}
	good := `{"id":"s1","status":{"state":"Running"},"entrypoint":["x"],"createdAt":"2026-01-01T00:00:00Z"}`
	require.NoError(t, sp.CheckResponse(in, 200, js, []byte(good)))
	err = sp.CheckResponse(in, 200, js, []byte(strings.Replace(good, `"id"`, `"image":"x","id"`, 1)))
	require.ErrorContains(t, err, "image")
	err = sp.CheckResponse(in, 200, js, []byte(`{"id":"s1","status":{"state":"Asleep"},"entrypoint":[],"createdAt":"2026-01-01T00:00:00Z"}`))
	require.ErrorContains(t, err, "Asleep")
	require.ErrorContains(t, sp.CheckResponse(in, 200, http.Header{"Content-Type": {"text/event-stream"}}, nil), "not documented")

	in, err = sp.CheckRequest(request(t, http.MethodPost, "/command", `{"command":"ls"}`))
	require.NoError(t, err)
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	require.NoError(t, sp.CheckResponse(in, 200, sse, []byte("data: {\"type\":\"stdout\",\"text\":\"hi\"}\n\n")))
	require.ErrorContains(t, sp.CheckResponse(in, 200, sse, []byte("data: {\"type\":\"shout\"}\n\n")), "shout")
	require.ErrorContains(t, sp.CheckResponse(in, 200, sse, []byte("data: {\"text\":\"no type\"}\n\n")), "type")
	require.ErrorContains(t, sp.CheckResponse(in, 200, sse, []byte("data: not json\n\n")), "not JSON")
}

// TestFakeReportsSpecViolations proves the fake runs the check on what it
// receives: a create request with an unknown field is recorded as an
// OpenAPI violation.
func TestFakeReportsSpecViolations(t *testing.T) {
	s := New(t)
	body := strings.Replace(goodCreate, `"image"`, `"extra":1,"image"`, 1)
	req, err := http.NewRequest(http.MethodPost, s.URL+"/sandboxes", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("OPEN-SANDBOX-API-KEY", s.APIKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	var found bool
	for _, v := range s.Violations() {
		found = found || (strings.HasPrefix(v, "OpenAPI subset:") && strings.Contains(v, "extra"))
	}
	assert.True(t, found, "the fake did not report the unknown field through the OpenAPI check")
}
