package opensandboxtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a fake lifecycle server with its sandboxes.
type Server struct {
	URL        string // base URL, ending in /v1
	APIKey     string
	ExecdToken string
	// ReadyAfter is how many GETs a new sandbox stays Pending.
	ReadyAfter int
	// FailCreate, when set, makes every create answer 500.
	FailCreate bool
	// ExecdDown, when set, makes new sandboxes' execd refuse connections.
	ExecdDown bool
	// CodeContextHangs makes creating a code context wait until the
	// client gives up, as execd does in a sandbox without Jupyter.
	CodeContextHangs bool
	// Grace is how long a command stream stays open after its last
	// event (execd's EXECD_API_GRACE_SHUTDOWN, 1 s by default as there).
	Grace time.Duration
	// ExecdTmp is the fake execd's TMPDIR on this host, where it keeps
	// each command's output as execd does (a directory of the test's).
	ExecdTmp string
	// ExecdAddr, when set before the first sandbox is created, is the
	// host:port of a real execd that every sandbox's endpoint then
	// names instead of a fake one (see TestRealExecd).
	ExecdAddr string

	t    testing.TB
	root string
	srv  *httptest.Server

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	seq       int
	bad       []string
}

// Sandbox is one fake sandbox.
type Sandbox struct {
	ID        string
	Dir       string // its directory on this host
	State     string
	Metadata  map[string]string
	Env       map[string]string
	Image     string
	ExpiresAt *time.Time
	Created   time.Time
	Renewals  int
	gets      int
	execd     *Execd
}

// New starts a fake server; it stops, with every sandbox, at the end of
// the test. Violations make the test fail.
func New(t testing.TB) *Server {
	s := &Server{APIKey: "lifecycle-key", ExecdToken: "execd-token", ReadyAfter: 1, t: t,
		root: t.TempDir(), sandboxes: map[string]*Sandbox{}, Grace: time.Second}
	s.ExecdTmp = filepath.Join(s.root, "tmp")
	if err := os.MkdirAll(s.ExecdTmp, 0o755); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(validated(http.HandlerFunc(s.serve), s.record))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sb := range s.sandboxes {
			sb.execd.Close()
		}
		for _, v := range s.bad {
			t.Errorf("opensandboxtest: request violates the API: %s", v)
		}
	})
	return s
}

// record keeps a violation found by the OpenAPI check.
func (s *Server) record(msg string) {
	s.mu.Lock()
	s.bad = append(s.bad, "OpenAPI subset: "+msg)
	s.mu.Unlock()
}

// violation answers 400 and records why.
func (s *Server) violation(w http.ResponseWriter, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	s.mu.Lock()
	s.bad = append(s.bad, msg)
	s.mu.Unlock()
	writeError(w, http.StatusBadRequest, "INVALID_REQUEST", msg)
}

// Violations lists the bad requests seen so far (and forgets them, so a
// test that provokes one on purpose can check it and go on).
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.bad
	s.bad = nil
	return v
}

// Get returns a copy of sandbox id as it is now, or nil.
func (s *Server) Get(id string) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil {
		return nil
	}
	c := *sb
	if sb.ExpiresAt != nil {
		at := *sb.ExpiresAt
		c.ExpiresAt = &at
	}
	return &c
}

// Live counts the sandboxes not yet terminated.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sb := range s.sandboxes {
		if sb.State != "Terminated" {
			n++
		}
	}
	return n
}

// Expire terminates a sandbox behind its client's back, as a TTL would.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		s.terminate(sb)
	}
}

func (s *Server) terminate(sb *Sandbox) {
	sb.State = "Terminated"
	sb.execd.Close()
}

// writeJSON answers v as JSON without a final newline, as execd (gin)
// and the lifecycle server do.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"RUNTIME_ERROR","message":"fake: bad answer"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError answers execd's error object.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
}

// decodeStrict reads a JSON body with no unknown fields.
func decodeStrict(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%s %s: Content-Type %q, want application/json", r.Method, r.URL.Path, ct)
	}
	d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	return nil
}

type createRequest struct {
	Image *struct {
		URI string `json:"uri"`
	} `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	Timeout        *int              `json:"timeout"`
	ResourceLimits map[string]string `json:"resourceLimits"`
	Env            map[string]string `json:"env"`
	Metadata       map[string]string `json:"metadata"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("OPEN-SANDBOX-API-KEY") != s.APIKey {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong OPEN-SANDBOX-API-KEY")
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/v1/sandboxes")
	if !ok {
		s.violation(w, "%s %s: no such path", r.Method, r.URL.Path)
		return
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case p == "" && r.Method == http.MethodPost:
		s.create(w, r)
	case p == "" && r.Method == http.MethodGet:
		s.list(w, r)
	case len(parts) >= 1 && parts[0] != "":
		s.mu.Lock()
		sb := s.sandboxes[parts[0]]
		s.mu.Unlock()
		if sb == nil {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "no sandbox "+parts[0])
			return
		}
		s.one(w, r, sb, parts[1:])
	default:
		s.violation(w, "%s %s: no such operation", r.Method, r.URL.Path)
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decodeStrict(r, &req); err != nil {
		s.violation(w, "%v", err)
		return
	}
	switch {
	case req.Image == nil || req.Image.URI == "":
		s.violation(w, "create: image.uri is required")
		return
	case len(req.Entrypoint) == 0:
		s.violation(w, "create: entrypoint is required with an image")
		return
	case req.ResourceLimits == nil:
		s.violation(w, "create: resourceLimits is required")
		return
	case req.Timeout != nil && *req.Timeout < 60:
		s.violation(w, "create: timeout %d is under 60", *req.Timeout)
		return
	}
	if s.FailCreate {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "no capacity")
		return
	}
	s.mu.Lock()
	s.seq++
	id := "sbx-" + strconv.Itoa(s.seq)
	s.mu.Unlock()
	dir := filepath.Join(s.root, id)
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", err.Error())
		return
	}
	sb := &Sandbox{ID: id, Dir: dir, State: "Pending", Metadata: req.Metadata, Env: req.Env,
		Image: req.Image.URI, Created: time.Now().UTC()}
	if req.Timeout != nil {
		at := sb.Created.Add(time.Duration(*req.Timeout) * time.Second)
		sb.ExpiresAt = &at
	}
	sb.execd = newExecd(s, sb)
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, s.view(sb))
}

func (s *Server) view(sb *Sandbox) map[string]any {
	v := map[string]any{"id": sb.ID, "status": map[string]string{"state": sb.State},
		"entrypoint": []string{"/opt/execd", "--", "tail", "-f", "/dev/null"}, "createdAt": sb.Created.Format(time.RFC3339)}
	if sb.Metadata != nil {
		v["metadata"] = sb.Metadata
	}
	if sb.ExpiresAt != nil {
		v["expiresAt"] = sb.ExpiresAt.Format(time.RFC3339)
	}
	return v
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		s.violation(w, "list: bad metadata filter %q", q.Get("metadata"))
		return
	}
	states := q["state"]
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []map[string]any{}
	for _, sb := range s.sandboxes {
		if !matches(sb, want, states) {
			continue
		}
		items = append(items, s.view(sb))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "pagination": map[string]any{
		"page": 1, "pageSize": max(len(items), 1), "totalItems": len(items), "totalPages": 1, "hasNextPage": false}})
}

func matches(sb *Sandbox, want url.Values, states []string) bool {
	for k := range want {
		if sb.Metadata[k] != want.Get(k) {
			return false
		}
	}
	if len(states) == 0 {
		return true
	}
	for _, st := range states {
		if st == sb.State {
			return true
		}
	}
	return false
}
