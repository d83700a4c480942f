package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// execdPort is the port execd listens on inside a sandbox.
const execdPort = 44772

// headerExecdToken carries execd's access token.
const headerExecdToken = "X-EXECD-ACCESS-TOKEN"

// headerTailCursor carries the byte offset a logs answer ends at.
const headerTailCursor = "EXECD-COMMANDS-TAIL-CURSOR"

// runCommandRequest is what POST /command takes.
type runCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd,omitempty"`
	Background bool              `json:"background,omitempty"`
	TimeoutMS  int64             `json:"timeout,omitempty"`
	Envs       map[string]string `json:"envs,omitempty"`
}

// commandStatus is what GET /command/status/{id} answers.
type commandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content,omitempty"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code"`
	Error      string     `json:"error,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// codeContext is a code execution context: an interpreter whose state
// lasts from one RunCode to the next.
type codeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
}

// metrics is what GET /metrics answers.
type metrics struct {
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"`
}

// ExecdClient talks to the execd daemon of one sandbox.
type ExecdClient struct{ w wire }

// NewExecdClient returns a client for execd at baseURL, sending token
// (when not empty) and the extra headers an Endpoint asks for. hc nil
// means http.DefaultClient; streams are bounded by the request context,
// so hc should have no overall timeout.
func NewExecdClient(baseURL, token string, headers map[string]string, hc *http.Client) *ExecdClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	h := map[string]string{}
	for k, v := range headers {
		h[k] = v
	}
	if token != "" {
		h[headerExecdToken] = token
	}
	return &ExecdClient{w: wire{base: strings.TrimRight(baseURL, "/"), headers: h, hc: hc}}
}

// ping checks that execd answers.
func (c *ExecdClient) ping(ctx context.Context) error {
	return c.w.call(ctx, "ping execd", http.MethodGet, "/ping", nil, nil, nil, http.StatusOK)
}

// waitReady pings every interval until execd answers or ctx ends. An
// answer that refuses the token (401, 403) ends the wait at once.
func (c *ExecdClient) waitReady(ctx context.Context, interval time.Duration) error {
	for {
		err := c.ping(ctx)
		var ae *APIError
		if err == nil || (errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("opensandbox: execd never became ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// stopStream, returned by an event callback, stops reading a stream
// there: the call returns nil and the rest of the stream (execd keeps a
// command's stream open for its grace second after the last event) is
// drained in the background rather than cut. Cutting it was seen to make
// the real execd kill a command running at that moment with SIGPIPE
// (execd forwards every signal it gets to its running commands).
var stopStream = errors.New("opensandbox: stop reading the stream")

// errFinal is StopStream under the name the provider uses.
var errFinal = stopStream

// maxDrain bounds the background read of a stopped stream.
const maxDrain = 30 * time.Second

// stream posts body to path and hands every event to on until the stream
// ends; an error from on stops reading and is returned (StopStream: nil).
// Cancelling ctx while the stream is read ends it.
func (c *ExecdClient) stream(ctx context.Context, op, path string, body any, on func(event) error) error {
	// The request outlives ctx when on stops the stream, so that its end
	// can be drained; until then ctx's end cancels it.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	resp, err := c.w.request(rctx, op, http.MethodPost, path, nil, body, http.StatusOK)
	if err != nil {
		stop()
		cancel()
		return ctxErr(ctx, err)
	}
	d := newEventReader(resp.Body)
	for {
		ev, err := d.Next()
		if err == io.EOF {
			stop()
			cancel()
			resp.Body.Close()
			return nil
		}
		if err == nil {
			err = on(ev)
			if errors.Is(err, stopStream) {
				if !stop() { // ctx ended meanwhile: nothing to drain for
					cancel()
					resp.Body.Close()
					return nil
				}
				go func() {
					t := time.AfterFunc(maxDrain, cancel)
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONBody))
					resp.Body.Close()
					t.Stop()
					cancel()
				}()
				return nil
			}
			if err != nil {
				stop()
				cancel()
				resp.Body.Close()
				return err
			}
			continue
		}
		stop()
		cancel()
		resp.Body.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("opensandbox: %s: %w", op, err)
	}
}

// ctxErr prefers ctx's error when ctx ended.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// runCommand runs a command and hands its events to on: "init" (Text is
// the command id), "ping", one "stdout" or "stderr" event per line (see
// lines.go), then either "error" (a failed command: Error.Value is the
// exit code, or -1 with Go's "signal: killed" as the traceback) or
// "execution_complete", never both. A background command's stream has
// "init" and "execution_complete". execd keeps every stream open for
// another second after its last event (EXECD_API_GRACE_SHUTDOWN); on
// returns errFinal to stop there.
func (c *ExecdClient) runCommand(ctx context.Context, r runCommandRequest, on func(event) error) error {
	return c.stream(ctx, "run command", "/command", r, on)
}

// interrupt stops a running command.
func (c *ExecdClient) interrupt(ctx context.Context, id string) error {
	return c.w.call(ctx, "interrupt command "+id, http.MethodDelete, "/command", url.Values{"id": {id}}, nil, nil, http.StatusOK)
}

// status reads a command's status; an unknown id matches fs.ErrNotExist.
func (c *ExecdClient) status(ctx context.Context, id string) (*commandStatus, error) {
	var s commandStatus
	err := c.w.call(ctx, "status of command "+id, http.MethodGet, "/command/status/"+url.PathEscape(id), nil, nil, &s, http.StatusOK)
	return &s, err
}

// logs reads at most max bytes of a background command's combined
// output from byte offset cursor on, and returns them with the offset
// execd says the log ends at (-1 when it does not say).
func (c *ExecdClient) logs(ctx context.Context, id string, cursor int64, max int64) ([]byte, int64, error) {
	q := url.Values{}
	if cursor > 0 {
		q.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	op := "logs of command " + id
	resp, b, err := c.w.fetch(ctx, op, "/command/"+url.PathEscape(id)+"/logs", q, max, http.StatusOK)
	if err != nil {
		return nil, 0, err
	}
	tail := int64(-1)
	if v := resp.Header.Get(headerTailCursor); v != "" {
		if tail, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("opensandbox: %s: bad %s %q", op, headerTailCursor, v)
		}
	}
	return b, tail, nil
}

// createSession starts a bash session whose shell state (cwd, variables)
// lasts across RunInSession calls.
func (c *ExecdClient) createSession(ctx context.Context, cwd string) (string, error) {
	var r struct {
		ID string `json:"session_id"`
	}
	body := map[string]string{}
	if cwd != "" {
		body["cwd"] = cwd
	}
	err := c.w.call(ctx, "create session", http.MethodPost, "/session", nil, body, &r, http.StatusOK, http.StatusCreated)
	if err == nil && r.ID == "" {
		err = fmt.Errorf("opensandbox: create session: the answer has no session_id")
	}
	return r.ID, err
}

// runInSession runs command in a session, streaming its events to on.
func (c *ExecdClient) runInSession(ctx context.Context, session, command string, timeout time.Duration, on func(event) error) error {
	body := map[string]any{"command": command}
	if timeout > 0 {
		body["timeout"] = timeout.Milliseconds()
	}
	return c.stream(ctx, "run in session "+session, "/session/"+url.PathEscape(session)+"/run", body, on)
}

// deleteSession ends a session.
func (c *ExecdClient) deleteSession(ctx context.Context, session string) error {
	return c.w.call(ctx, "delete session "+session, http.MethodDelete, "/session/"+url.PathEscape(session), nil, nil, nil, http.StatusOK, http.StatusNoContent)
}

// createContext starts an interpreter for language (e.g. "python").
func (c *ExecdClient) createContext(ctx context.Context, language string) (codeContext, error) {
	var cc codeContext
	err := c.w.call(ctx, "create "+language+" context", http.MethodPost, "/code/context", nil, codeContext{Language: language}, &cc, http.StatusOK, http.StatusCreated)
	if err == nil && cc.ID == "" {
		err = fmt.Errorf("opensandbox: create %s context: the answer has no id", language)
	}
	return cc, err
}

// runCode runs code in a context, streaming its events to on: "stdout",
// "stderr", "result", "error" (an exception) and "execution_complete".
func (c *ExecdClient) runCode(ctx context.Context, cc codeContext, code string, on func(event) error) error {
	return c.stream(ctx, "run code", "/code", map[string]any{"context": cc, "code": code}, on)
}

// interruptCode interrupts the code running in a context.
func (c *ExecdClient) interruptCode(ctx context.Context, contextID string) error {
	return c.w.call(ctx, "interrupt code "+contextID, http.MethodDelete, "/code", url.Values{"id": {contextID}}, nil, nil, http.StatusOK)
}

// deleteContext ends an interpreter.
func (c *ExecdClient) deleteContext(ctx context.Context, id string) error {
	return c.w.call(ctx, "delete context "+id, http.MethodDelete, "/code/contexts/"+url.PathEscape(id), nil, nil, nil, http.StatusOK, http.StatusNoContent)
}

// metrics reads the sandbox's resource use.
func (c *ExecdClient) metrics(ctx context.Context) (*metrics, error) {
	var m metrics
	err := c.w.call(ctx, "metrics", http.MethodGet, "/metrics", nil, nil, &m, http.StatusOK)
	return &m, err
}
