package provisioner

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

// FuzzCreateBody feeds arbitrary bodies to POST /api/sandboxes: the
// server must answer 200, 400 or 413 with JSON, never panic, and only
// valid ids may reach the backend.
func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{`{"sandbox_id":"s1","thread_id":"t1"}`, `{"sandbox_id":"s1","extra_mounts":[{"host_path":"/srv/sage/a","container_path":"/a","read_only":true}]}`,
		`{"sandbox_id":"s1","env":{"A":"b"}}`, `{`, `null`, `[]`, `{"sandbox_id":"\u0000"}`, `{"sandbox_id":"s1"}{}`} {
		f.Add([]byte(s))
	}
	mem := &orchestratortest.Backend{}
	s, err := NewServer(Options{Backend: mem, Logger: quietLogger(), Mounts: MountPolicy{Prefixes: []string{"/srv/sage"}}, MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/sandboxes", bytes.NewReader(body))
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 413:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("content type %q", rec.Header().Get("Content-Type"))
		}
		var b createBody
		if decodeJSON(body, &b) == nil && rec.Code == 200 && validateBody(b) != nil {
			t.Fatalf("invalid body accepted: %q", body)
		}
	})
}
