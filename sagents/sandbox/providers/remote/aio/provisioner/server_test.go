package provisioner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

func TestClientServerLifecycle(t *testing.T) {
	mem := &orchestratortest.Backend{}
	c, _ := startServer(t, mem, nil)
	ctx := context.Background()
	req := orchestrator.CreateRequest{SandboxID: "0123456789abcdef", ThreadID: "thread-1", Owner: "proc-1", Image: "ignored", Port: 1,
		Mounts: []sandbox.VolumeMount{{HostPath: "/srv/sage/threads/thread-1/user-data/workspace", SandboxPath: "/mnt/user-data/workspace"},
			{HostPath: "/srv/sage/skills", SandboxPath: "/mnt/skills", ReadOnly: true}},
		Env: map[string]string{"A": "1"}, Token: "tok"}
	info, err := c.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if info.URL != "http://sandbox-0123456789abcdef:9090" || info.ThreadID != "thread-1" || info.Backend != backendName || info.Token != "tok" {
		t.Fatalf("create: %+v", info)
	}
	got := mem.Requests()[0]
	if got.Image != "img:1" || got.Port != 9090 || got.MemoryMB != 512 || got.CPUs != 0.5 || got.Owner != "proc-1" || got.Token != "tok" || got.Env["A"] != "1" {
		t.Fatalf("server defaults not applied: %+v", got)
	}
	if len(got.Mounts) != 2 || !got.Mounts[1].ReadOnly || got.Mounts[0].SandboxPath != "/mnt/user-data/workspace" {
		t.Fatalf("mounts: %+v", got.Mounts)
	}
	found, ok, err := c.Discover(ctx, info.SandboxID)
	if err != nil || !ok || found.URL != info.URL || found.ContainerID != "id-0123456789abcdef" || found.CreatedAt.IsZero() {
		t.Fatalf("discover: %+v %v %v", found, ok, err)
	}
	if alive, err := c.IsAlive(ctx, info); !alive || err != nil {
		t.Fatalf("alive: %v %v", alive, err)
	}
	list, err := c.ListRunning(ctx)
	if err != nil || len(list) != 1 || list[0].SandboxID != info.SandboxID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.Destroy(ctx, info); err != nil {
		t.Fatal(err)
	}
	if mem.Destroyed()[0].ContainerID != "id-0123456789abcdef" {
		t.Fatalf("destroy did not pass the discovered info: %+v", mem.Destroyed()[0])
	}
	if _, ok, err := c.Discover(ctx, info.SandboxID); ok || err != nil {
		t.Fatalf("discover after destroy: %v %v", ok, err)
	}
	if alive, err := c.IsAlive(ctx, info); alive || err != nil {
		t.Fatalf("alive after destroy: %v %v", alive, err)
	}
	if err := c.Destroy(ctx, info); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if _, err := c.Get(ctx, info.SandboxID); !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("get of unknown: %v", err)
	}
}

func TestHealth(t *testing.T) {
	mem := &orchestratortest.Backend{}
	c, ts := startServer(t, mem, nil)
	anon, _ := newAPIClient(ts.URL, "")
	h, err := anon.Health(context.Background())
	if err != nil || h.Status != "ok" || h.Backend != "mem" {
		t.Fatalf("health: %+v %v", h, err)
	}
	mem.SetCheckErr(errBoom)
	_, err = c.Health(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "boom") {
		t.Fatalf("health with failing backend: %v", err)
	}
}

func TestAuth(t *testing.T) {
	_, ts := startServer(t, &orchestratortest.Backend{}, nil)
	for _, key := range []string{"", "wrong", "K3Y", "k3y2"} {
		c, _ := newAPIClient(ts.URL, key)
		_, err := c.ListRunning(context.Background())
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !errors.Is(err, fs.ErrPermission) || ae.Code != "unauthorized" {
			t.Fatalf("key %q: %v", key, err)
		}
	}
}

// raw sends one request and returns status and decoded error body.
func raw(t *testing.T, method, url, body string, hdr map[string]string) (int, errorBody) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("X-API-Key", "k3y")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb errorBody
	if resp.StatusCode >= 300 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: error Content-Type %q", method, url, ct)
		}
		if err := json.Unmarshal(data, &eb); err != nil || eb.Detail == "" {
			t.Fatalf("%s %s: error body %q", method, url, data)
		}
	}
	return resp.StatusCode, eb
}

func TestBadInput(t *testing.T) {
	mem := &orchestratortest.Backend{}
	_, ts := startServer(t, mem, nil)
	api := ts.URL + "/api/sandboxes"
	long := strings.Repeat("a", 65)
	cases := []struct {
		name, method, url, body string
		want                    int
	}{
		{"bad sandbox id", "POST", api, `{"sandbox_id":"../etc","thread_id":"t"}`, 400},
		{"long sandbox id", "POST", api, `{"sandbox_id":"` + long + `"}`, 400},
		{"missing sandbox id", "POST", api, `{"thread_id":"t"}`, 400},
		{"bad thread id", "POST", api, `{"sandbox_id":"s1","thread_id":"a b"}`, 400},
		{"bad thread id slash", "POST", api, `{"sandbox_id":"s1","thread_id":"a/b"}`, 400},
		{"bad owner", "POST", api, `{"sandbox_id":"s1","owner":"x;y"}`, 400},
		{"bad env", "POST", api, `{"sandbox_id":"s1","env":{"1A":"x"}}`, 400},
		{"malformed", "POST", api, `{"sandbox_id":`, 400},
		{"not an object", "POST", api, `[1,2]`, 400},
		{"trailing data", "POST", api, `{"sandbox_id":"s1"} {}`, 400},
		{"unknown field", "POST", api, `{"sandbox_id":"s1","image":"evil"}`, 400},
		{"wrong type", "POST", api, `{"sandbox_id":1}`, 400},
		{"relative mount", "POST", api, `{"sandbox_id":"s1","extra_mounts":[{"host_path":"srv","container_path":"/x"}]}`, 400},
		{"dotdot mount", "POST", api, `{"sandbox_id":"s1","extra_mounts":[{"host_path":"/srv/sage/../../etc","container_path":"/x"}]}`, 400},
		{"unlisted mount", "POST", api, `{"sandbox_id":"s1","extra_mounts":[{"host_path":"/var/run/docker.sock","container_path":"/x"}]}`, 400},
		{"prefix trick", "POST", api, `{"sandbox_id":"s1","extra_mounts":[{"host_path":"/srv/sagex","container_path":"/x"}]}`, 400},
		{"too large", "POST", api, `{"sandbox_id":"s1","env":{"A":"` + strings.Repeat("x", 2<<20) + `"}}`, 413},
		{"get bad id", "GET", api + "/a%20b", "", 400},
		{"delete bad id", "DELETE", api + "/a.b", "", 400},
		{"get unknown", "GET", api + "/nope", "", 404},
		{"no endpoint", "GET", ts.URL + "/api/other", "", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := raw(t, tc.method, tc.url, tc.body, nil)
			if status != tc.want {
				t.Fatalf("status %d (%+v), want %d", status, eb, tc.want)
			}
		})
	}
	if status, _ := raw(t, "POST", api, `{"sandbox_id":"s1"}`, map[string]string{"Content-Type": "text/plain"}); status != 400 {
		t.Fatalf("text/plain body: %d", status)
	}
	if len(mem.Requests()) != 0 {
		t.Fatalf("bad input reached the backend: %+v", mem.Requests())
	}
}

func TestMountPolicyDrop(t *testing.T) {
	mem := &orchestratortest.Backend{}
	c, _ := startServer(t, mem, func(o *Options) { o.Mounts.DropUnlisted = true })
	_, err := c.Create(context.Background(), orchestrator.CreateRequest{SandboxID: "s1",
		Mounts: []sandbox.VolumeMount{{HostPath: "/etc", SandboxPath: "/mnt/etc"}, {HostPath: "/srv/sage", SandboxPath: "/mnt/s"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m := mem.Requests()[0].Mounts; len(m) != 1 || m[0].HostPath != "/srv/sage" {
		t.Fatalf("mounts: %+v", m)
	}
	if _, err := NewServer(Options{Backend: mem, Mounts: MountPolicy{Prefixes: []string{"/"}}}); err == nil {
		t.Fatal("prefix / accepted")
	}
}

func TestBackendErrors(t *testing.T) {
	mem := &orchestratortest.Backend{}
	c, _ := startServer(t, mem, nil)
	for _, tc := range []struct {
		err    error
		status int
	}{
		{errBoom, 500},
		{fmt.Errorf("taken: %w", fs.ErrExist), 409},
		{fmt.Errorf("bad: %w", fs.ErrInvalid), 400},
		{context.DeadlineExceeded, 504},
	} {
		mem.FailCreate(tc.err)
		_, err := c.Create(context.Background(), orchestrator.CreateRequest{SandboxID: "s1"})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(ae.Message, tc.err.Error()) {
			t.Fatalf("%v: got %v", tc.err, err)
		}
	}
}

func TestClientErrors(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := newAPIClient(u, ""); err == nil {
			t.Fatalf("URL %q accepted", u)
		}
	}
	// A non-JSON error body (a proxy's) keeps its text.
	e := answerError("GET /x", 502, []byte("bad gateway\n"))
	if e.Message != "bad gateway" || e.Status != 502 {
		t.Fatalf("%+v", e)
	}
	// FastAPI validation errors carry a list in detail.
	e = answerError("POST /api/sandboxes", 422, []byte(`{"detail":[{"loc":["body","thread_id"]}]}`))
	if !strings.Contains(e.Message, "thread_id") {
		t.Fatalf("%+v", e)
	}
	e = answerError("GET /x", 500, nil)
	if e.Message != "Internal Server Error" {
		t.Fatalf("%+v", e)
	}
}

func TestClientPathPrefixAndEscaping(t *testing.T) {
	mem := &orchestratortest.Backend{}
	_, ts := startServer(t, mem, nil)
	c, err := newAPIClient(ts.URL+"/", "k3y")
	if err != nil {
		t.Fatal(err)
	}
	// An id with a slash must not address another endpoint.
	_, err = c.Get(context.Background(), "a/b")
	var ae *APIError
	if !errors.As(err, &ae) || (ae.Status != 400 && ae.Status != 404) {
		t.Fatalf("get a/b: %v", err)
	}
}

func TestKeyedMutexPrunes(t *testing.T) {
	var k keyedMutex
	u1 := k.lock("a")
	done := make(chan struct{})
	go func() { u2 := k.lock("a"); u2(); close(done) }()
	u1()
	<-done
	if len(k.m) != 0 {
		t.Fatalf("entries left: %d", len(k.m))
	}
}

func TestRegisteredBackend(t *testing.T) {
	t.Setenv(envURL, "")
	if _, err := orchestrator.NewBackend(backendName, map[string]any{}); err == nil || !strings.Contains(err.Error(), envURL) {
		t.Fatalf("no URL: %v", err)
	}
	b, err := orchestrator.NewBackend(backendName, map[string]any{configURL: "http://127.0.0.1:1", configAPIKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(*apiClient); !ok || c.apiKey != "x" {
		t.Fatalf("%T %+v", b, b)
	}
	t.Setenv(envURL, "http://127.0.0.1:2")
	t.Setenv(EnvAPIKey, "y")
	b, err = orchestrator.NewBackend(backendName, nil)
	if err != nil || b.(*apiClient).apiKey != "y" || b.(*apiClient).base.Port() != "2" {
		t.Fatalf("from env: %v", err)
	}
}
