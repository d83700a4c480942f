package observability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

type panicker struct{ observability.Base }

func (panicker) ChainStart(context.Context, observability.ChainInfo) (context.Context, error) {
	panic("boom start")
}
func (panicker) ToolStart(context.Context, observability.ToolCall) (context.Context, error) {
	return nil, errors.New("tool start failed")
}
func (panicker) ToolEnd(context.Context, observability.ToolResult) error { panic("boom end") }
func (panicker) ChainEnd(context.Context, observability.ChainResult) error {
	return errors.New("chain end failed")
}

func quietManager(t *testing.T, hs ...observability.Handler) (*observability.Manager, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	var mu sync.Mutex
	lw := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	m := observability.New(observability.Options{Logger: slog.New(slog.NewTextHandler(lw, nil)),
		Handlers: hs})
	return m, &buf
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestNestingUnderConcurrency(t *testing.T) {
	r := &observabilitytest.Recorder{}
	m, _ := quietManager(t, r)
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := fmt.Sprintf("s%03d", i)
			ctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: sess, Name: "turn"})
			actx := m.AgentStart(ctx, observability.AgentInfo{Name: "a"})
			lctx := m.LLMStart(actx, observability.LLMRequest{Model: "m"})
			m.LLMEnd(lctx, observability.LLMResponse{})
			tctx := m.ToolStart(actx, observability.ToolCall{Name: "t"})
			if i%2 == 0 {
				m.ToolError(tctx, errors.New("x"))
			} else {
				m.ToolEnd(tctx, observability.ToolResult{})
			}
			m.AgentEnd(actx, observability.AgentResult{})
			m.ChainEnd(ctx, observability.ChainResult{})
		}()
	}
	wg.Wait()

	ev := r.Events()
	require.Len(t, ev, n*8)
	byID := map[uint64]observability.Run{}
	starts, ends := map[uint64]int{}, map[uint64]int{}
	for _, e := range ev {
		require.NotZero(t, e.Run.ID, e.Op)
		if strings.HasSuffix(e.Op, "Start") {
			starts[e.Run.ID]++
			byID[e.Run.ID] = e.Run
		} else {
			ends[e.Run.ID]++
		}
	}
	require.Len(t, byID, n*4)
	sessions := map[string]bool{}
	for id, run := range byID {
		assert.Equal(t, 1, starts[id])
		assert.Equal(t, 1, ends[id], "run %d ended once", id)
		root := byID[run.RootID]
		assert.Equal(t, observability.KindChain, root.Kind)
		assert.Equal(t, root.SessionID, run.SessionID, "session inherited and never crossed")
		switch run.Kind {
		case observability.KindChain:
			assert.Zero(t, run.ParentID)
			sessions[run.SessionID] = true
		case observability.KindAgent:
			assert.Equal(t, run.RootID, run.ParentID)
		case observability.KindLLM, observability.KindTool:
			p := byID[run.ParentID]
			assert.Equal(t, observability.KindAgent, p.Kind)
			assert.Equal(t, run.RootID, p.RootID)
		}
	}
	assert.Len(t, sessions, n)
}

func TestPanickingHandlerIsolated(t *testing.T) {
	r := &observabilitytest.Recorder{}
	m, logs := quietManager(t, panicker{}, r)
	for range 3 {
		ctx := m.ChainStart(context.Background(), observability.ChainInfo{Name: "c"})
		run, ok := observability.RunFromContext(ctx)
		require.True(t, ok, "the run survives a panicking handler")
		tctx := m.ToolStart(ctx, observability.ToolCall{Name: "t"})
		trun, _ := observability.RunFromContext(tctx)
		assert.Equal(t, run.ID, trun.ParentID)
		require.NotPanics(t, func() { m.ToolEnd(tctx, observability.ToolResult{}) })
		m.ChainEnd(ctx, observability.ChainResult{})
	}
	var ops []string
	for _, e := range r.Events() {
		ops = append(ops, e.Op)
	}
	assert.Equal(t, strings.Repeat("ChainStart ToolStart ToolEnd ChainEnd ", 3), strings.Join(ops, " ")+" ")
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "boom start"), "rate-limited: one record per handler and event\n%s", out)
	assert.Equal(t, 1, strings.Count(out, "boom end"))
	assert.Equal(t, 1, strings.Count(out, "tool start failed"))
	assert.Equal(t, 1, strings.Count(out, "chain end failed"))
	assert.Contains(t, out, "handler panicked")
}

func TestRateLimitReportsSuppressed(t *testing.T) {
	var buf bytes.Buffer
	m := observability.New(observability.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		LogInterval: -1, Handlers: []observability.Handler{panicker{}}})
	for range 3 {
		m.ChainStart(context.Background(), observability.ChainInfo{})
	}
	assert.Equal(t, 3, strings.Count(buf.String(), "boom start"))
}

func TestErrorPathsLeaveNoOpenRuns(t *testing.T) {
	r := &observabilitytest.Recorder{}
	m, logs := quietManager(t, r)
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{Name: "c"})
	actx := m.AgentStart(ctx, observability.AgentInfo{Name: "a"})
	tctx := m.ToolStart(actx, observability.ToolCall{Name: "t"})
	_ = m.LLMStart(tctx, observability.LLMRequest{Model: "m"})
	// The agent code failed without ending its tool and llm runs.
	m.ChainError(ctx, errors.New("turn failed"))

	var got []string
	for _, e := range r.Events()[4:] {
		got = append(got, e.Op)
	}
	assert.Equal(t, []string{"LLMError", "ToolError", "AgentError", "ChainError"}, got, "deepest first")
	for _, e := range r.Events()[4:7] {
		assert.ErrorIs(t, e.Err, observability.ErrParentEnded)
		assert.Equal(t, "parent_ended", observability.ErrorType(e.Err))
	}
	// Late ends are harmless no-ops.
	n := len(r.Events())
	m.ToolEnd(tctx, observability.ToolResult{})
	m.AgentEnd(actx, observability.AgentResult{})
	m.ChainEnd(ctx, observability.ChainResult{})
	assert.Len(t, r.Events(), n)
	_ = logs
}

func TestEndWithDescendantContext(t *testing.T) {
	r := &observabilitytest.Recorder{}
	m, logs := quietManager(t, r)
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{})
	tctx := m.ToolStart(ctx, observability.ToolCall{Name: "t"})
	lctx := m.LLMStart(tctx, observability.LLMRequest{})
	// Misuse: ToolEnd with the llm's context ends the tool (and the llm).
	m.ToolEnd(lctx, observability.ToolResult{})
	m.ChainEnd(tctx, observability.ChainResult{}) // descendant context also finds the chain
	var ops []string
	for _, e := range r.Events() {
		ops = append(ops, e.Op)
	}
	assert.Equal(t, []string{"ChainStart", "ToolStart", "LLMStart", "LLMError", "ToolEnd", "ChainEnd"}, ops)
	assert.Contains(t, logs.String(), "still open")
}

func TestErrorEndsOnlyItsOwnRun(t *testing.T) {
	r := &observabilitytest.Recorder{}
	m, _ := quietManager(t, r)
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{})
	t1 := m.ToolStart(ctx, observability.ToolCall{Name: "ok"})
	t2 := m.ToolStart(ctx, observability.ToolCall{Name: "bad"})
	m.ToolError(t2, errors.New("exit 1"))
	m.ToolEnd(t1, observability.ToolResult{})
	m.ChainEnd(ctx, observability.ChainResult{})
	ev := r.Events()
	require.Len(t, ev, 6)
	assert.Equal(t, "ToolError", ev[3].Op)
	assert.Equal(t, "bad", ev[3].Run.Name)
	assert.Equal(t, "ToolEnd", ev[4].Op)
	assert.Equal(t, "ok", ev[4].Run.Name)
}

func TestNilAndEmptyManager(t *testing.T) {
	var nilM *observability.Manager
	ctx := context.Background()
	assert.Equal(t, ctx, nilM.ChainStart(ctx, observability.ChainInfo{}))
	nilM.ChainEnd(ctx, observability.ChainResult{})
	nilM.ToolError(ctx, errors.New("x"))
	assert.NoError(t, nilM.Shutdown(ctx))

	m := observability.New(observability.Options{})
	msgs := []observability.Message{{Role: "user"}}
	allocs := testing.AllocsPerRun(100, func() {
		c := m.ChainStart(ctx, observability.ChainInfo{SessionID: "s", Name: "n"})
		c2 := m.LLMStart(c, observability.LLMRequest{Model: "m", Messages: msgs})
		m.LLMEnd(c2, observability.LLMResponse{Usage: observability.Usage{InputTokens: 1}})
		m.LLMError(c2, context.Canceled)
		m.ChainEnd(c, observability.ChainResult{})
	})
	assert.Zero(t, allocs)
}

type shutdowner struct {
	observability.Base
	n int
}

func (s *shutdowner) Shutdown(context.Context) error { s.n++; return errors.New("closing") }

func TestShutdownIdempotent(t *testing.T) {
	s := &shutdowner{}
	m, _ := quietManager(t, s)
	err := m.Shutdown(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "closing")
	assert.NoError(t, m.Shutdown(context.Background()))
	assert.Equal(t, 1, s.n)
	assert.Zero(t, m.Len())
}

type typedErr struct{}

func (typedErr) Error() string     { return "typed" }
func (typedErr) ErrorType() string { return "rate_limited" }

func TestErrorType(t *testing.T) {
	assert.Equal(t, "", observability.ErrorType(nil))
	assert.Equal(t, "rate_limited", observability.ErrorType(fmt.Errorf("wrap: %w", typedErr{})))
	assert.Equal(t, "timeout", observability.ErrorType(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	assert.Equal(t, "canceled", observability.ErrorType(context.Canceled))
	assert.Equal(t, "_OTHER", observability.ErrorType(errors.New("plain")))
	assert.Equal(t, "not_found", observability.ErrorType(fmt.Errorf("open: %w", &fsPathErr)))
}

type statusErr struct{ HTTPStatusCode int }

func (e *statusErr) Error() string { return "status " + strconv.Itoa(e.HTTPStatusCode) }

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// TestErrorTypeIsLowCardinality: error kinds, never Go type names.
func TestErrorTypeIsLowCardinality(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("call: %w", &statusErr{429}), "rate_limited"},
		{&statusErr{401}, "authentication"},
		{&statusErr{403}, "authentication"},
		{&statusErr{500}, "server_error"},
		{&statusErr{503}, "server_error"},
		{&statusErr{504}, "timeout"},
		{&statusErr{400}, "400"},
		{&statusErr{0}, "_OTHER"},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), "connection"},
		{syscall.ECONNRESET, "connection"},
		{&net.DNSError{Err: "no such host", Name: "x"}, "connection"},
		{fmt.Errorf("read: %w", netTimeout{}), "timeout"},
		{fmt.Errorf("x: %w", fs.ErrPermission), "permission_denied"},
		{syscall.EINVAL, "_OTHER"},
	} {
		assert.Equal(t, tc.want, observability.ErrorType(tc.err), "%v", tc.err)
	}
}
