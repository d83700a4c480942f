package opensandboxtest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// one serves the operations on one sandbox: GET, DELETE, pause, resume,
// renew-expiration and endpoints/{port}.
func (s *Server) one(w http.ResponseWriter, r *http.Request, sb *Sandbox, rest []string) {
	s.mu.Lock()
	if sb.ExpiresAt != nil && time.Now().After(*sb.ExpiresAt) && sb.State != "Terminated" {
		s.terminate(sb)
	}
	s.mu.Unlock()
	op := strings.Join(rest, "/")
	switch {
	case op == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		sb.gets++
		if sb.State == "Pending" && sb.gets > s.ReadyAfter {
			sb.State = "Running"
		}
		if sb.State == "Resuming" {
			sb.State = "Running"
		}
		v := s.view(sb)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, v)
	case op == "" && r.Method == http.MethodDelete:
		s.mu.Lock()
		if sb.State != "Terminated" {
			s.terminate(sb)
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case op == "pause" && r.Method == http.MethodPost:
		s.transition(w, sb, "Running", "Paused")
	case op == "resume" && r.Method == http.MethodPost:
		s.transition(w, sb, "Paused", "Resuming")
	case op == "renew-expiration" && r.Method == http.MethodPost:
		s.renew(w, r, sb)
	case len(rest) == 2 && rest[0] == "endpoints" && r.Method == http.MethodGet:
		port, err := strconv.Atoi(rest[1])
		if err != nil || port < 1 || port > 65535 {
			s.violation(w, "endpoint: bad port %q", rest[1])
			return
		}
		if port != 44772 {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "nothing listens on port "+rest[1])
			return
		}
		s.mu.Lock()
		state, addr := sb.State, sb.execd.Addr()
		if s.ExecdAddr != "" {
			addr = s.ExecdAddr
		}
		s.mu.Unlock()
		if state == "Terminated" {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "sandbox "+sb.ID+" is terminated")
			return
		}
		// Like the real server: host and path, no scheme.
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": addr})
	default:
		s.violation(w, "%s %s: no such operation", r.Method, r.URL.Path)
	}
}

func (s *Server) transition(w http.ResponseWriter, sb *Sandbox, from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.State != from {
		writeError(w, http.StatusConflict, "INVALID_STATE", "sandbox "+sb.ID+" is "+sb.State+", not "+from)
		return
	}
	sb.State = to
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request, sb *Sandbox) {
	var req struct {
		ExpiresAt string `json:"expiresAt"`
	}
	if err := decodeStrict(r, &req); err != nil {
		s.violation(w, "%v", err)
		return
	}
	at, err := time.Parse(time.RFC3339, req.ExpiresAt)
	if err != nil {
		s.violation(w, "renew: expiresAt %q is not RFC 3339", req.ExpiresAt)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sb.State == "Terminated":
		writeError(w, http.StatusNotFound, "NOT_FOUND", "sandbox "+sb.ID+" is terminated")
	case !at.After(time.Now()) || (sb.ExpiresAt != nil && !at.After(*sb.ExpiresAt)):
		writeError(w, http.StatusBadRequest, "INVALID_EXPIRATION", "expiresAt must be in the future and later than the current one")
	default:
		sb.ExpiresAt = &at
		sb.Renewals++
		writeJSON(w, http.StatusOK, map[string]string{"expiresAt": at.Format(time.RFC3339)})
	}
}
