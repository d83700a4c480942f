package orchestrator

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// sandboxInfoJSON is the wire form of SandboxInfo: created_at is a Unix
// timestamp in seconds (a float, as the seed format writes it).
type sandboxInfoJSON struct {
	SandboxID     string          `json:"sandbox_id"`
	ThreadID      string          `json:"thread_id,omitempty"`
	URL           string          `json:"sandbox_url"`
	BaseURL       string          `json:"base_url,omitempty"` // legacy, read only
	ContainerName string          `json:"container_name,omitempty"`
	ContainerID   string          `json:"container_id,omitempty"`
	Owner         string          `json:"owner,omitempty"`
	Token         string          `json:"token,omitempty"`
	Backend       string          `json:"backend,omitempty"`
	CreatedAt     json.RawMessage `json:"created_at,omitempty"`
	LastUsed      json.RawMessage `json:"last_used_at,omitempty"`
	PoolSlot      string          `json:"pool_slot,omitempty"`
	Fence         int64           `json:"fence,omitempty"`
}

// MarshalJSON writes the seed format (created_at in Unix seconds).
func (s SandboxInfo) MarshalJSON() ([]byte, error) {
	w := sandboxInfoJSON{SandboxID: s.SandboxID, ThreadID: s.ThreadID, URL: s.URL,
		ContainerName: s.ContainerName, ContainerID: s.ContainerID, Owner: s.Owner,
		Token: s.Token, Backend: s.Backend, PoolSlot: s.PoolSlot, Fence: s.Fence}
	if !s.CreatedAt.IsZero() {
		w.CreatedAt = unixSeconds(s.CreatedAt)
	}
	if !s.LastUsed.IsZero() {
		w.LastUsed = unixSeconds(s.LastUsed)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the seed format: sandbox_url, or the legacy base_url
// when it is absent; created_at as Unix seconds or RFC 3339, and "now"
// when missing (as the original did).
func (s *SandboxInfo) UnmarshalJSON(b []byte) error {
	var w sandboxInfoJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = SandboxInfo{SandboxID: w.SandboxID, ThreadID: w.ThreadID, URL: w.URL,
		ContainerName: w.ContainerName, ContainerID: w.ContainerID, Owner: w.Owner,
		Token: w.Token, Backend: w.Backend, PoolSlot: w.PoolSlot, Fence: w.Fence}
	if s.URL == "" {
		s.URL = w.BaseURL
	}
	t, err := parseCreatedAt(w.CreatedAt)
	if err != nil {
		return err
	}
	s.CreatedAt = t
	if len(w.LastUsed) > 0 {
		if s.LastUsed, err = parseCreatedAt(w.LastUsed); err != nil {
			return err
		}
	}
	return nil
}

func unixSeconds(t time.Time) json.RawMessage {
	return json.RawMessage(fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000))
}

func parseCreatedAt(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Now(), nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return time.UnixMicro(int64(math.Round(f * 1e6))), nil
	}
	var t time.Time
	if err := json.Unmarshal(raw, &t); err != nil {
		return time.Time{}, fmt.Errorf("aio: created_at %s: want Unix seconds or RFC 3339", raw)
	}
	return t, nil
}
