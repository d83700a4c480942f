package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// A recording is what the real execd answered to a few requests, kept
// under testdata/execd as the project's own fixture. Requests name the
// workspace $WS, execd's TMPDIR $TMP, and the last command or context id
// $ID; answers are kept as execd sent them and compared after norm.
type recording struct {
	RecordedFrom string `json:"recorded_from"`
	Note         string `json:"note"`
	Steps        []step `json:"steps"`
}

type step struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	Body   any    `json:"body,omitempty"`
	// Upload is the content for POST /files/upload to Query's path.
	Upload *string `json:"upload,omitempty"`
	// Range is the request's Range header.
	Range string `json:"range,omitempty"`
	// WaitMS waits before the request (for a background command).
	WaitMS int `json:"wait_ms,omitempty"`
	// Ignore: the answer is not compared (a setup step).
	Ignore bool `json:"ignore,omitempty"`

	Status int    `json:"status"`
	Answer string `json:"answer"`
	// GraceMS is how long an event stream stayed open after its last
	// event (commands only).
	GraceMS int64 `json:"grace_ms,omitempty"`
}

// recordedFrom names what the recordings were made against.
const recordedFrom = "alibaba/OpenSandbox 4db3a993 (execd built from components/execd with go build, run on the host with JupyterServer 1.23 and ipykernel 6.17, kernelspec named python), recorded 2026-12-01"

// target is one execd to replay recordings against.
type replayTarget struct {
	url, token, ws, tmp string
}

func (r replayTarget) subst(s, id string) string {
	return strings.NewReplacer("$WS", r.ws, "$TMP", r.tmp, "$ID", id).Replace(s)
}

// do sends one step and returns its status, answer and grace.
func (r replayTarget) do(t *testing.T, st step, id string) (int, string, int64) {
	t.Helper()
	if st.WaitMS > 0 {
		time.Sleep(time.Duration(st.WaitMS) * time.Millisecond)
	}
	u := r.url + r.subst(st.Path, id)
	if st.Query != "" {
		u += "?" + r.subst(st.Query, id)
	}
	var body io.Reader
	ctype := ""
	switch {
	case st.Upload != nil:
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		path := strings.TrimPrefix(r.subst(st.Query, id), "path=")
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
		h.Set("Content-Type", "application/json")
		pw, _ := mw.CreatePart(h)
		fmt.Fprintf(pw, `{"path":%q,"mode":644}`, path)
		h = textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="file"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, _ = mw.CreatePart(h)
		_, _ = io.WriteString(pw, *st.Upload)
		require.NoError(t, mw.Close())
		body, ctype = &buf, mw.FormDataContentType()
		u = r.url + r.subst(st.Path, id)
	case st.Body != nil:
		b, err := json.Marshal(st.Body)
		require.NoError(t, err)
		body, ctype = strings.NewReader(r.subst(string(b), id)), "application/json"
	}
	req, err := http.NewRequest(st.Method, u, body)
	require.NoError(t, err)
	req.Header.Set(headerExecdToken, r.token)
	if st.Range != "" {
		req.Header.Set("Range", st.Range)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
			last = time.Now()
		}
		if err != nil {
			break
		}
	}
	grace := int64(0)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && st.Path == "/command" {
		grace = time.Since(last).Milliseconds()
	}
	return resp.StatusCode, out.String(), grace
}

var (
	hexID     = regexp.MustCompile(`\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\bctx-[0-9]+\b`)
	numFields = regexp.MustCompile(`"(timestamp|execution_time)":[0-9]+,?`)
	timeField = regexp.MustCompile(`"(started_at|finished_at|modified_at|created_at)":"[^"]*"`)
	initText  = regexp.MustCompile(`"type":"init","text":"([^"]+)"`)
	ctxID     = regexp.MustCompile(`^\{"id":"([^"]+)"`)
)

// norm makes two answers comparable: ids, times and the paths of the
// workspace and TMPDIR are replaced, and an event stream is put in a
// canonical order where execd's order is not fixed (its stdout and
// stderr are read by two goroutines; a code cell's output and end come
// over two Jupyter channels): events are listed by kind, each kind in
// the order it came, with one ping.
func (r replayTarget) norm(s string, code bool) string {
	s = r.clean(s)
	if !strings.HasPrefix(s, `{"type":`) {
		return s
	}
	events := strings.Split(strings.TrimRight(s, "\n"), "\n\n")
	byKind := map[string][]string{}
	var kinds []string
	for _, ev := range events {
		k := "other"
		if m := regexp.MustCompile(`^\{"type":"([a-z_]+)"`).FindStringSubmatch(ev); m != nil {
			k = m[1]
		}
		if k == "ping" || ev == "" {
			// When execd's first ping goes out against the first output
			// varies; that one was sent is kept as a mark after init.
			if k == "ping" && len(byKind["init"]) > 0 && !strings.Contains(byKind["init"][0], "+ping") {
				byKind["init"][0] += "+ping"
			}
			continue
		}
		if k == "error" && code {
			ev = normTraceback(ev)
		}
		if k == "stderr" && code && strings.Contains(ev, "UserWarning: To exit") {
			continue // IPython's own warning on SystemExit, with its install path
		}
		if _, seen := byKind[k]; !seen {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], ev)
	}
	if code {
		sort.Strings(kinds)
	} else {
		// A command's order is fixed but for stdout against stderr.
		sort.SliceStable(kinds, func(i, j int) bool { return kinds[i] == "stdout" && kinds[j] == "stderr" })
	}
	var out []string
	for _, k := range kinds {
		out = append(out, byKind[k]...)
	}
	return strings.Join(out, "\n\n")
}

// clean replaces what differs from run to run: ids, times, and the
// paths of the workspace and TMPDIR.
func (r replayTarget) clean(s string) string {
	s = strings.NewReplacer(r.ws, "$WS", r.tmp, "$TMP").Replace(s)
	s = hexID.ReplaceAllString(s, "$$ID")
	s = numFields.ReplaceAllStringFunc(s, func(f string) string {
		if strings.HasPrefix(f, `"execution_time"`) {
			return "" // 0 is left out, so a fast command has none
		}
		return `"timestamp":0` + strings.TrimLeft(f, `"timestamp:0123456789`)
	})
	return timeField.ReplaceAllString(s, `"$1":"T"`)
}

// normTraceback keeps the last line of a traceback (the exception's
// name and value, coloured as IPython colours it) and drops the frames,
// which name files of the machine.
func normTraceback(ev string) string {
	var v struct {
		Type      string         `json:"type"`
		Timestamp int64          `json:"timestamp"`
		Error     map[string]any `json:"error"`
	}
	if json.Unmarshal([]byte(ev), &v) != nil || v.Error == nil {
		return ev
	}
	if tb, ok := v.Error["traceback"].([]any); ok && len(tb) > 0 {
		v.Error["traceback"] = []any{tb[len(tb)-1]}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func loadRecordings(t *testing.T) map[string]*recording {
	files, err := filepath.Glob("testdata/execd/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "the recordings under testdata/execd")
	out := map[string]*recording{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var r recording
		require.NoError(t, json.Unmarshal(b, &r), f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = &r
	}
	return out
}

// replay runs every recording against target and compares each answer
// with the recorded one; record, instead, writes target's answers into
// the recordings.
func replay(t *testing.T, rec map[string]*recording, mk func(t *testing.T) replayTarget, record bool) {
	names := make([]string, 0, len(rec))
	for n := range rec {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := rec[name]
		t.Run(name, func(t *testing.T) {
			tg := mk(t)
			id := ""
			for i := range r.Steps {
				st := &r.Steps[i]
				status, answer, grace := tg.do(t, *st, id)
				if m := initText.FindStringSubmatch(answer); m != nil {
					id = m[1]
				} else if m := ctxID.FindStringSubmatch(answer); m != nil && st.Path == "/code/context" {
					id = m[1]
				}
				code := st.Path == "/code"
				if record {
					st.Status, st.Answer, st.GraceMS = status, tg.clean(answer), grace
					if st.Ignore {
						st.Answer = ""
					}
					continue
				}
				if st.Ignore {
					continue
				}
				assert.Equal(t, st.Status, status, "step %d %s %s", i, st.Method, st.Path)
				assert.Equal(t, tg.norm(st.Answer, code), tg.norm(answer, code), "step %d %s %s", i, st.Method, st.Path)
				if st.GraceMS > 0 {
					assert.InDelta(t, st.GraceMS, grace, 400, "step %d: the stream stays open after its last event as long as execd's", i)
				}
			}
			if record {
				r.RecordedFrom = recordedFrom
				b, err := json.MarshalIndent(r, "", "  ")
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join("testdata/execd", name+".json"), append(b, '\n'), 0o644))
			}
		})
	}
}

// fakeTarget is one new sandbox's fake execd.
func fakeTarget(t *testing.T) replayTarget {
	srv := opensandboxtest.New(t)
	life := NewLifecycleClient(srv.URL, srv.APIKey, nil)
	ctx := context.Background()
	sb, err := life.create(ctx, createRequest{Image: imageSpec{URI: "img:1"},
		Entrypoint: []string{"tail", "-f", "/dev/null"}, ResourceLimits: map[string]string{"cpu": "1"}})
	require.NoError(t, err)
	_, err = life.waitRunning(ctx, sb.ID, 10*time.Millisecond)
	require.NoError(t, err)
	ep, err := life.endpoint(ctx, sb.ID, execdPort)
	require.NoError(t, err)
	ws, err := filepath.EvalSymlinks(filepath.Join(srv.Get(sb.ID).Dir, "workspace"))
	require.NoError(t, err)
	tmp, err := filepath.EvalSymlinks(srv.ExecdTmp)
	require.NoError(t, err)
	return replayTarget{url: ep.URL, token: srv.ExecdToken, ws: ws, tmp: tmp}
}

// TestFakeExecdAnswersAsRecorded replays every recording of the real
// execd against the fake one: the fake must answer the same statuses
// and bytes (after norm), and hold a command stream open as long.
func TestFakeExecdAnswersAsRecorded(t *testing.T) {
	replay(t, loadRecordings(t), fakeTarget, false)
}

// The variables of TestRealExecd.
const (
	envExecdURL   = "SAGE_OPENSANDBOX_EXECD_URL"     // e.g. http://127.0.0.1:44772
	envExecdToken = "SAGE_OPENSANDBOX_EXECD_TOKEN"   // its EXECD_ACCESS_TOKEN
	envExecdTmp   = "SAGE_OPENSANDBOX_EXECD_TMPDIR"  // its TMPDIR (default /tmp)
	envExecdWork  = "SAGE_OPENSANDBOX_EXECD_WORKDIR" // where it may make workspaces (default /tmp)
	envRecord     = "SAGE_OPENSANDBOX_RECORD"        // 1: write its answers into testdata/execd
)

// realExecd returns the real execd named by SAGE_OPENSANDBOX_EXECD_URL,
// or skips: CI cannot build fetched code, so there the recordings stand
// for it (TestFakeExecdAnswersAsRecorded).
func realExecd(t *testing.T) (url, token, tmp, work string) {
	url = os.Getenv(envExecdURL)
	if url == "" {
		t.Skipf("no real execd: set %s (and %s, %s, %s) to run against one", envExecdURL, envExecdToken, envExecdTmp, envExecdWork)
	}
	tmp, work = os.Getenv(envExecdTmp), os.Getenv(envExecdWork)
	if tmp == "" {
		tmp = "/tmp"
	}
	if work == "" {
		work = "/tmp"
	}
	return url, os.Getenv(envExecdToken), tmp, work
}

// realTarget is a new workspace on the real execd.
func realTarget(t *testing.T) replayTarget {
	url, token, tmp, work := realExecd(t)
	e := NewExecdClient(url, token, nil, nil)
	ws := filepath.Join(work, "sage-rec-"+strings.ReplaceAll(t.Name(), "/", "-")+fmt.Sprint(time.Now().UnixNano()))
	require.NoError(t, e.makeDirs(context.Background(), map[string]permission{ws: {Mode: 755}}))
	t.Cleanup(func() { _ = e.RemoveDirs(context.Background(), ws) })
	return replayTarget{url: url, token: token, ws: ws, tmp: tmp}
}

// TestRealExecdAnswersAsRecorded replays the recordings against a real
// execd (opt-in, see realExecd); with SAGE_OPENSANDBOX_RECORD=1 it
// records them again instead.
func TestRealExecdAnswersAsRecorded(t *testing.T) {
	realExecd(t)
	replay(t, loadRecordings(t), realTarget, os.Getenv(envRecord) == "1")
}

// realServer is a fake lifecycle server whose sandboxes all name the
// real execd of SAGE_OPENSANDBOX_EXECD_URL, each with a workspace of its
// own under SAGE_OPENSANDBOX_EXECD_WORKDIR.
func realServer(t *testing.T) (*opensandboxtest.Server, func(t *testing.T) *sandbox.Sandbox) {
	url, token, tmp, work := realExecd(t)
	srv := opensandboxtest.New(t)
	srv.ExecdAddr, srv.ExecdToken, srv.ExecdTmp = strings.TrimPrefix(url, "http://"), token, tmp
	n := 0
	return srv, func(t *testing.T) *sandbox.Sandbox {
		n++
		ws := filepath.Join(work, fmt.Sprintf("sage-real-%d-%d", time.Now().UnixNano(), n))
		h := openSandbox(t, srv, map[string]any{keyWorkspace: ws})
		t.Cleanup(func() {
			_ = NewExecdClient(url, token, nil, nil).RemoveDirs(context.Background(), ws)
		})
		return h
	}
}

// TestRealExecdContract runs the contract suite through the provider
// against a real execd (opt-in, see realExecd), the lifecycle server
// being the fake one.
func TestRealExecdContract(t *testing.T) {
	_, mk := realServer(t)
	sandboxtest.Run(t, sandboxtest.Options{New: mk, PythonResults: true})
}

// The variables of TestRealServerContract: a real OpenSandbox lifecycle
// server (which starts each sandbox with execd in it).
const (
	envServerURL   = "SAGE_OPENSANDBOX_TEST_URL"     // e.g. http://127.0.0.1:8080/v1
	envServerKey   = "SAGE_OPENSANDBOX_TEST_API_KEY" // its API key
	envServerImage = "SAGE_OPENSANDBOX_TEST_IMAGE"   // the sandbox image (default DefaultImage)
	// A shell command the sandbox runs as its entrypoint (e.g. one that
	// starts a Jupyter server, then waits), and k=v,k=v variables for it
	// (e.g. JUPYTER_HOST and JUPYTER_TOKEN, which execd reads).
	envServerEntrypoint = "SAGE_OPENSANDBOX_TEST_ENTRYPOINT"
	envServerEnv        = "SAGE_OPENSANDBOX_TEST_ENV"
)

// TestRealServerContract runs the contract suite through the provider
// against a real lifecycle server (opt-in, SAGE_OPENSANDBOX_TEST_URL):
// every sandbox is a container it starts.
func TestRealServerContract(t *testing.T) {
	url := os.Getenv(envServerURL)
	if url == "" {
		t.Skipf("no real OpenSandbox server: set %s (and %s, %s) to run against one", envServerURL, envServerKey, envServerImage)
	}
	pc := map[string]any{keyReadySeconds: 120}
	if ep := os.Getenv(envServerEntrypoint); ep != "" {
		pc[keyEntrypoint] = []any{"sh", "-c", ep}
	}
	if kv := os.Getenv(envServerEnv); kv != "" {
		env := map[string]any{}
		for _, p := range strings.Split(kv, ",") {
			k, v, _ := strings.Cut(p, "=")
			env[k] = v
		}
		pc[keyEnv] = env
	}
	sandboxtest.Run(t, sandboxtest.Options{New: func(t *testing.T) *sandbox.Sandbox {
		h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{
			Provider: providerName, ServerURL: url, APIKey: os.Getenv(envServerKey), Image: os.Getenv(envServerImage),
			ProviderConfig: pc}})
		require.NoError(t, err)
		return h
	}, PythonResults: true})
}
