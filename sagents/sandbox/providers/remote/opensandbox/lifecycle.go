package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// headerAPIKey carries the lifecycle server's API key.
const headerAPIKey = "OPEN-SANDBOX-API-KEY"

// The sandbox states.
const (
	statePending    = "Pending"
	stateRunning    = "Running"
	statePausing    = "Pausing"
	statePaused     = "Paused"
	stateResuming   = "Resuming"
	stateStopping   = "Stopping"
	stateTerminated = "Terminated"
	stateFailed     = "Failed"
)

// createRequest is what POST /sandboxes takes (the subset sage uses).
type createRequest struct {
	Image          imageSpec         `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	Timeout        *int              `json:"timeout,omitempty"` // seconds, at least 60; nil: no expiry
	ResourceLimits map[string]string `json:"resourceLimits"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

// imageSpec names the image of a sandbox.
type imageSpec struct {
	URI string `json:"uri"`
}

// Status is a sandbox's lifecycle status.
type Status struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// SandboxInfo is what the lifecycle server says about one sandbox.
type SandboxInfo struct {
	ID         string            `json:"id"`
	Status     Status            `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
}

// endpoint is how to reach a port of a sandbox.
type endpoint struct {
	URL     string            `json:"endpoint"`
	Headers map[string]string `json:"headers,omitempty"`
}

// LifecycleClient talks to an OpenSandbox lifecycle server.
type LifecycleClient struct{ w wire }

// NewLifecycleClient returns a client for the server at baseURL (for
// example http://host:8080/v1), authenticating with apiKey when it is
// not empty. hc nil means http.DefaultClient.
func NewLifecycleClient(baseURL, apiKey string, hc *http.Client) *LifecycleClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	h := map[string]string{"Accept": "application/json"}
	if apiKey != "" {
		h[headerAPIKey] = apiKey
	}
	return &LifecycleClient{w: wire{base: strings.TrimRight(baseURL, "/"), headers: h, hc: hc}}
}

// create asks for a new sandbox; it starts Pending.
func (c *LifecycleClient) create(ctx context.Context, r createRequest) (*SandboxInfo, error) {
	var s SandboxInfo
	if err := c.w.call(ctx, "create sandbox", http.MethodPost, "/sandboxes", nil, r, &s, http.StatusAccepted, http.StatusOK, http.StatusCreated); err != nil {
		return nil, err
	}
	if s.ID == "" {
		return nil, fmt.Errorf("opensandbox: create sandbox: the answer has no id")
	}
	return &s, nil
}

// get reads one sandbox; a missing one matches fs.ErrNotExist.
func (c *LifecycleClient) get(ctx context.Context, id string) (*SandboxInfo, error) {
	var s SandboxInfo
	err := c.w.call(ctx, "get sandbox "+id, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil, &s, http.StatusOK)
	return &s, err
}

// maxListPages bounds List.
const maxListPages = 20

// List returns the sandboxes carrying all of metadata whose state is one
// of states (none: any state), at most 20 pages of 50.
func (c *LifecycleClient) List(ctx context.Context, metadata map[string]string, states ...string) ([]SandboxInfo, error) {
	var out []SandboxInfo
	for page := 1; page <= maxListPages; page++ {
		q := url.Values{"page": {strconv.Itoa(page)}, "pageSize": {"50"}}
		if len(metadata) > 0 {
			m := url.Values{}
			for k, v := range metadata {
				m.Set(k, v)
			}
			q.Set("metadata", m.Encode())
		}
		for _, s := range states {
			q.Add("state", s)
		}
		var r struct {
			Items      []SandboxInfo `json:"items"`
			Pagination struct {
				HasNextPage bool `json:"hasNextPage"`
			} `json:"pagination"`
		}
		if err := c.w.call(ctx, "list sandboxes", http.MethodGet, "/sandboxes", q, nil, &r, http.StatusOK); err != nil {
			return nil, err
		}
		out = append(out, r.Items...)
		if !r.Pagination.HasNextPage {
			break
		}
	}
	return out, nil
}

// Delete terminates a sandbox.
func (c *LifecycleClient) Delete(ctx context.Context, id string) error {
	return c.w.call(ctx, "delete sandbox "+id, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, nil, http.StatusNoContent, http.StatusOK)
}

// pause asks the server to pause a running sandbox (asynchronous).
func (c *LifecycleClient) pause(ctx context.Context, id string) error {
	return c.w.call(ctx, "pause sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", nil, nil, nil, http.StatusAccepted, http.StatusOK, http.StatusNoContent)
}

// resume asks the server to resume a paused sandbox (asynchronous).
func (c *LifecycleClient) resume(ctx context.Context, id string) error {
	return c.w.call(ctx, "resume sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/resume", nil, nil, nil, http.StatusAccepted, http.StatusOK, http.StatusNoContent)
}

// renew moves a sandbox's expiry to at and returns the new expiry.
func (c *LifecycleClient) renew(ctx context.Context, id string, at time.Time) (time.Time, error) {
	var r struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	err := c.w.call(ctx, "renew sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/renew-expiration", nil,
		map[string]string{"expiresAt": at.UTC().Format(time.RFC3339)}, &r, http.StatusOK)
	return r.ExpiresAt, err
}

// endpoint returns how to reach port inside the sandbox. An endpoint
// without a scheme gets the lifecycle server's.
func (c *LifecycleClient) endpoint(ctx context.Context, id string, port int) (*endpoint, error) {
	var e endpoint
	p := fmt.Sprintf("/sandboxes/%s/endpoints/%d", url.PathEscape(id), port)
	if err := c.w.call(ctx, fmt.Sprintf("endpoint of sandbox %s port %d", id, port), http.MethodGet, p, nil, nil, &e, http.StatusOK); err != nil {
		return nil, err
	}
	if e.URL == "" {
		return nil, fmt.Errorf("opensandbox: endpoint of sandbox %s port %d: empty answer", id, port)
	}
	if !strings.Contains(e.URL, "://") {
		scheme := "http"
		if u, err := url.Parse(c.w.base); err == nil && u.Scheme != "" {
			scheme = u.Scheme
		}
		e.URL = scheme + "://" + e.URL
	}
	return &e, nil
}

// waitRunning polls the sandbox every interval until it is Running. A
// sandbox that fails or terminates first is an error naming its reason.
func (c *LifecycleClient) waitRunning(ctx context.Context, id string, interval time.Duration) (*SandboxInfo, error) {
	for {
		s, err := c.get(ctx, id)
		if err != nil {
			return nil, err
		}
		switch s.Status.State {
		case stateRunning:
			return s, nil
		case stateFailed, stateTerminated, stateStopping:
			return nil, fmt.Errorf("opensandbox: sandbox %s is %s (%s: %s)", id, s.Status.State, s.Status.Reason, s.Status.Message)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("opensandbox: sandbox %s still %s: %w", id, s.Status.State, ctx.Err())
		case <-time.After(interval):
		}
	}
}
