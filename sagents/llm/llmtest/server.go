package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map; it fails the test on invalid JSON.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("llmtest: request body is not JSON: %v: %s", err, r.Body)
	}
	return m
}

// Reply is one scripted response.
type Reply struct {
	Status int               // default 200
	Header map[string]string // extra headers, e.g. Retry-After
	Body   string            // written as application/json when Events is nil
	// Events are SSE events. Each is written as "data: <e>\n\n", except
	// entries starting with ":" (comments) or "event:" which are written
	// verbatim followed by "\n\n". [DONE] follows unless NoDone.
	Events []string
	// Raw, when set, is written verbatim as a text/event-stream body (a
	// recorded transcript); Events and NoDone are then ignored.
	Raw         string
	NoDone      bool
	HeaderDelay time.Duration // sleep before the headers: a slow first byte
	EventDelay  time.Duration // sleep before each event
	Hangup      bool          // abort the connection after the events
}

// Server is a scripted OpenAI-compatible server on 127.0.0.1.
type Server struct {
	URL string // base URL ending in /v1

	srv *httptest.Server
	mu  sync.Mutex
	log []Request
	q   []Reply
	// Fallback answers when the script is empty. Default: 500.
	fallback func(Request) Reply
}

// New starts a server that plays replies in order; it is closed with t.
func New(t testing.TB, replies ...Reply) *Server {
	s := &Server{q: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// SetFallback sets the reply function used when the script is empty.
func (s *Server) SetFallback(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Last returns the last request received; it fails the test if none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("llmtest: no request received")
	}
	return reqs[len(reqs)-1]
}

func (s *Server) next(r Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, r)
	if len(s.q) > 0 {
		rep := s.q[0]
		s.q = s.q[1:]
		return rep
	}
	if s.fallback != nil {
		return s.fallback(r)
	}
	return Reply{Status: 500, Body: errorBody("server_error", "", "", "llmtest: no scripted reply")}
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	body, _ := io.ReadAll(hr.Body)
	rep := s.next(Request{Method: hr.Method, Path: hr.URL.Path, Header: hr.Header.Clone(), Body: body})
	if !sleep(hr, rep.HeaderDelay) {
		return
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Raw != "" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status(rep))
		io.WriteString(w, rep.Raw)
		return
	}
	if rep.Events == nil {
		writeJSON(w, rep)
		return
	}
	writeSSE(w, hr, rep)
}

func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, rep Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status(rep))
	io.WriteString(w, rep.Body)
}

func status(rep Reply) int {
	if rep.Status == 0 {
		return http.StatusOK
	}
	return rep.Status
}

func writeSSE(w http.ResponseWriter, r *http.Request, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status(rep))
	fl, _ := w.(http.Flusher)
	for _, e := range rep.Events {
		if !sleep(r, rep.EventDelay) {
			return
		}
		io.WriteString(w, frame(e))
		fl.Flush()
	}
	if rep.Hangup {
		panic(http.ErrAbortHandler) // drops the connection mid-stream
	}
	if !rep.NoDone {
		io.WriteString(w, "data: [DONE]\n\n")
		fl.Flush()
	}
}

func frame(e string) string {
	if strings.HasPrefix(e, ":") || strings.HasPrefix(e, "event:") {
		return e + "\n\n"
	}
	return "data: " + e + "\n\n"
}

// errorBody is an OpenAI error envelope. Empty code or param become null.
func errorBody(typ, code, param, message string) string {
	return fmt.Sprintf(`{"error":{"message":%s,"type":%s,"param":%s,"code":%s}}`,
		quote(message), quote(typ), nullable(param), nullable(code))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func nullable(s string) string {
	if s == "" {
		return "null"
	}
	return quote(s)
}
