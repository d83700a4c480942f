package provisioner

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Defaults are the sandbox settings the provisioner applies to every
// create; clients do not choose them.
type Defaults struct {
	Image    string
	Port     int // the sandbox API port inside the container; 0 means 8080
	MemoryMB int // 0: the backend's default
	CPUs     float64
}

// Checker is implemented by backends that can report their own health
// (the kube backend checks that the API server answers); /health answers
// 503 when it fails.
type Checker interface {
	Check(ctx context.Context) error
}

// Options configure a Server.
type Options struct {
	Backend orchestrator.Backend
	// BackendName is reported by /health ("kubernetes", "docker").
	BackendName string
	// APIKey, when set, is required in X-API-Key on /api/ requests.
	APIKey   string
	Mounts   MountPolicy
	Defaults Defaults
	// MaxBodyBytes bounds a request body; 0 means 1 MiB.
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// Server is the provisioner API over a Backend.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	locks keyedMutex
}

// NewServer checks opts and returns the handler.
func NewServer(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("provisioner: Options.Backend is nil")
	}
	if err := opts.Mounts.check(); err != nil {
		return nil, err
	}
	if opts.Defaults.Port == 0 {
		opts.Defaults.Port = 8080
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("POST /api/sandboxes", s.auth(s.create))
	s.mux.HandleFunc("GET /api/sandboxes", s.auth(s.list))
	s.mux.HandleFunc("GET /api/sandboxes/{id}", s.auth(s.get))
	s.mux.HandleFunc("DELETE /api/sandboxes/{id}", s.auth(s.destroy))
	s.mux.HandleFunc("POST /api/sandboxes/{id}/adopt", s.auth(s.adopt))
	s.mux.HandleFunc("GET /api/pool", s.auth(s.listPool))
	s.mux.HandleFunc("POST /api/pool/{id}/claim", s.auth(s.claim))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.APIKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-API-Key")), []byte(s.opts.APIKey)) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong X-API-Key")
			return
		}
		next(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := healthBody{Status: "ok", Backend: s.opts.BackendName}
	if c, ok := s.opts.Backend.(Checker); ok {
		if err := c.Check(r.Context()); err != nil {
			s.opts.Logger.Warn("provisioner: backend health check failed", "err", err)
			h.Status, h.Detail = "unavailable", err.Error()
			writeJSON(w, http.StatusServiceUnavailable, h)
			return
		}
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &body); err != nil {
		writeDecodeError(w, err)
		return
	}
	req, err := s.createRequest(body)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	if _, ok := s.opts.Backend.(orchestrator.Pooler); body.PoolSlot != "" && !ok {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("pool_slot: this provisioner's backend (%s) keeps no warm pool; set the provider's pool_size to 0", s.opts.BackendName))
		return
	}
	unlock := s.locks.lock(body.SandboxID)
	defer unlock()
	info, err := s.opts.Backend.Create(orchestrator.WithFence(r.Context(), body.Fence), req)
	if err != nil {
		s.opts.Logger.Error("provisioner: create failed", "sandbox", body.SandboxID, "thread", body.ThreadID, "err", err)
		writeBackendError(w, err)
		return
	}
	s.opts.Logger.Info("provisioner: sandbox up", "sandbox", info.SandboxID, "thread", info.ThreadID, "url", info.URL)
	writeJSON(w, http.StatusOK, toWire(info))
}

// createRequest validates the body and adds the server's defaults.
func (s *Server) createRequest(b createBody) (orchestrator.CreateRequest, error) {
	if err := validateBody(b); err != nil {
		return orchestrator.CreateRequest{}, err
	}
	mounts, dropped, err := s.opts.Mounts.apply(b.ExtraMounts)
	if err != nil {
		return orchestrator.CreateRequest{}, err
	}
	for _, m := range dropped {
		s.opts.Logger.Warn("provisioner: dropping a mount outside the allowed prefixes", "sandbox", b.SandboxID, "host_path", m.HostPath)
	}
	d := s.opts.Defaults
	return orchestrator.CreateRequest{SandboxID: b.SandboxID, ThreadID: b.ThreadID, Owner: b.Owner, Image: d.Image, Port: d.Port,
		Mounts: mounts, Env: b.Env, MemoryMB: d.MemoryMB, CPUs: d.CPUs, Token: b.Token, PoolSlot: b.PoolSlot}, nil
}

func validateBody(b createBody) error {
	switch {
	case !driver.ValidID(b.SandboxID):
		return fmt.Errorf("%w: sandbox_id %q: want 1-64 characters of A-Z a-z 0-9 _ -", ErrInvalid, b.SandboxID)
	case b.ThreadID != "" && !driver.ValidID(b.ThreadID):
		return fmt.Errorf("%w: thread_id %q: want 1-64 characters of A-Z a-z 0-9 _ -", ErrInvalid, b.ThreadID)
	case b.Owner != "" && !driver.ValidID(b.Owner):
		return fmt.Errorf("%w: owner %q: want 1-64 characters of A-Z a-z 0-9 _ -", ErrInvalid, b.Owner)
	case b.PoolSlot != "" && (b.PoolSlot != b.SandboxID || b.ThreadID != ""):
		return fmt.Errorf("%w: pool_slot %q: a pool sandbox's id is its slot (sandbox_id %q) and it has no thread (thread_id %q)", ErrInvalid, b.PoolSlot, b.SandboxID, b.ThreadID)
	}
	for k := range b.Env {
		if !driver.ValidEnvName(k) {
			return fmt.Errorf("%w: env name %q: want [A-Za-z_][A-Za-z0-9_]*", ErrInvalid, k)
		}
	}
	return nil
}

func (s *Server) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !driver.ValidID(id) {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("sandbox id %q: want 1-64 characters of A-Z a-z 0-9 _ -", id))
		return "", false
	}
	return id, true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	info, found, err := s.opts.Backend.Discover(r.Context(), id)
	switch {
	case err != nil:
		writeBackendError(w, err)
	case !found:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("sandbox %q not found", id))
	default:
		writeJSON(w, http.StatusOK, toWire(info))
	}
}

// destroy finds the sandbox first so the backend gets its container id
// and name; an unknown id is still passed on (to clean up halves of a
// failed create) and answers 200.
func (s *Server) destroy(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	fence, err := fenceHeader(r)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	unlock := s.locks.lock(id)
	defer unlock()
	info, found, err := s.opts.Backend.Discover(r.Context(), id)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	if !found {
		info = orchestrator.SandboxInfo{SandboxID: id}
	}
	if err := s.opts.Backend.Destroy(orchestrator.WithFence(r.Context(), fence), info); err != nil {
		s.opts.Logger.Error("provisioner: destroy failed", "sandbox", id, "err", err)
		writeBackendError(w, err)
		return
	}
	s.opts.Logger.Info("provisioner: sandbox destroyed", "sandbox", id, "was_running", found)
	writeJSON(w, http.StatusOK, deleteResult{OK: true, SandboxID: id})
}

// fenceHeader reads X-Sage-Fence (0 when absent).
func fenceHeader(r *http.Request) (int64, error) {
	v := r.Header.Get(fenceHeaderName)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %q: want a non-negative integer", ErrInvalid, fenceHeaderName, v)
	}
	return n, nil
}

// adopt lets a client that takes a sandbox over stamp its fencing token
// on it, where the backend can (orchestrator.Adopter); a stale token is
// 409 stale_fence.
func (s *Server) adopt(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	var body adoptBody
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &body); err != nil {
		writeDecodeError(w, err)
		return
	}
	unlock := s.locks.lock(id)
	defer unlock()
	info, found, err := s.opts.Backend.Discover(r.Context(), id)
	switch {
	case err != nil:
		writeBackendError(w, err)
		return
	case !found:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("sandbox %q not found", id))
		return
	}
	if a, ok := s.opts.Backend.(orchestrator.Adopter); ok {
		if info, err = a.Adopt(orchestrator.WithFence(r.Context(), body.Fence), info); err != nil {
			writeBackendError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, toWire(info))
}

// pooler is the backend's warm pool, or a 404 naming the fix.
func (s *Server) pooler(w http.ResponseWriter) (orchestrator.Pooler, bool) {
	pl, ok := s.opts.Backend.(orchestrator.Pooler)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("this provisioner's backend (%s) keeps no warm pool; set the provider's pool_size to 0", s.opts.BackendName))
	}
	return pl, ok
}

// listPool lists the backend's unclaimed pool sandboxes (every owner's).
func (s *Server) listPool(w http.ResponseWriter, r *http.Request) {
	pl, ok := s.pooler(w)
	if !ok {
		return
	}
	infos, err := pl.ListPool(r.Context())
	writeList(w, infos, err)
}

// claim hands the unclaimed pool sandbox {id} to a thread under the
// sandbox id of the body, with the caller's fencing token. Both ids are
// locked (in order), so no create, destroy or other claim of either
// runs meanwhile in this server; the backend refuses a claim that loses
// a race with another replica's.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	slot, ok := s.pathID(w, r)
	if !ok {
		return
	}
	pl, ok := s.pooler(w)
	if !ok {
		return
	}
	var body claimBody
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &body); err != nil {
		writeDecodeError(w, err)
		return
	}
	switch {
	case !driver.ValidID(body.SandboxID) || body.SandboxID == slot:
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("sandbox_id %q: want 1-64 characters of A-Z a-z 0-9 _ -, not the slot's own id", body.SandboxID))
		return
	case body.ThreadID != "" && !driver.ValidID(body.ThreadID):
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("thread_id %q: want 1-64 characters of A-Z a-z 0-9 _ -", body.ThreadID))
		return
	}
	first, second := min(slot, body.SandboxID), max(slot, body.SandboxID)
	unlock1 := s.locks.lock(first)
	defer unlock1()
	unlock2 := s.locks.lock(second)
	defer unlock2()
	info, found, err := s.opts.Backend.Discover(r.Context(), slot)
	switch {
	case err != nil:
		writeBackendError(w, err)
		return
	case !found || info.PoolSlot != slot:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no unclaimed pool sandbox %q", slot))
		return
	}
	out, err := pl.Claim(orchestrator.WithFence(r.Context(), body.Fence), info, body.SandboxID, body.ThreadID)
	if err != nil {
		s.opts.Logger.Warn("provisioner: claim failed", "slot", slot, "sandbox", body.SandboxID, "err", err)
		writeBackendError(w, err)
		return
	}
	s.opts.Logger.Info("provisioner: pool sandbox claimed", "slot", slot, "sandbox", out.SandboxID, "thread", out.ThreadID)
	writeJSON(w, http.StatusOK, toWire(out))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	infos, err := s.opts.Backend.ListRunning(r.Context())
	writeList(w, infos, err)
}

// writeList answers a listing: its sandboxes, or the backend's error.
func writeList(w http.ResponseWriter, infos []orchestrator.SandboxInfo, err error) {
	if err != nil {
		writeBackendError(w, err)
		return
	}
	out := wireSandboxList{Sandboxes: make([]wireSandbox, 0, len(infos)), Count: len(infos)}
	for _, info := range infos {
		out.Sandboxes = append(out.Sandboxes, toWire(info))
	}
	writeJSON(w, http.StatusOK, out)
}

// writeBackendError maps an error onto a status: invalid input 400,
// conflicts 409, timeouts 504, the rest 500.
func writeBackendError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, orchestrator.ErrStaleFence):
		writeError(w, http.StatusConflict, codeStaleFence, err.Error())
	case errors.Is(err, fs.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, fs.ErrExist):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "timeout", err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "canceled", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "backend_error", err.Error())
	}
}

// keyedMutex serialises calls per sandbox id; entries are dropped when
// no one holds or waits for them.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
