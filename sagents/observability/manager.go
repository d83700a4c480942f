package observability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Manager fans events out to its handlers, in registration order.
//
// The zero value is not usable; create one with [New]. A nil *Manager is
// valid and ignores every event, so instrumented code never has to check.
// All methods are safe for concurrent use.
type Manager struct {
	handlers atomic.Pointer[[]Handler]
	regMu    sync.Mutex // serialises Register and Shutdown

	log *slog.Logger
	lim limiter

	shutdownOnce sync.Once
}

// Options configures a [Manager]. The zero value is ready to use.
type Options struct {
	// Logger receives handler panics, handler errors and misuse (an end
	// without a matching start). Nil means slog.Default().
	Logger *slog.Logger
	// LogInterval is the minimum interval between two log records about
	// the same handler and event; records in between are counted and the
	// count is reported with the next record. Zero means 10s; a negative
	// interval logs every record.
	LogInterval time.Duration
	// Handlers are registered at construction.
	Handlers []Handler
}

// New returns a Manager.
func New(opts Options) *Manager {
	m := &Manager{log: opts.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	switch {
	case opts.LogInterval < 0:
		m.lim.every = 0
	case opts.LogInterval == 0:
		m.lim.every = 10 * time.Second
	default:
		m.lim.every = opts.LogInterval
	}
	if len(opts.Handlers) > 0 {
		m.Register(opts.Handlers...)
	}
	return m
}

// Register appends handlers. Runs already started are not shown to them:
// a run's events go to the handlers registered when it started.
func (m *Manager) Register(hs ...Handler) {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	var cur []Handler
	if p := m.handlers.Load(); p != nil {
		cur = *p
	}
	next := make([]Handler, 0, len(cur)+len(hs))
	next = append(next, cur...)
	for _, h := range hs {
		if h != nil {
			next = append(next, h)
		}
	}
	m.handlers.Store(&next)
}

// Len returns the number of registered handlers.
func (m *Manager) Len() int { return len(m.snapshot()) }

// Shutdown calls Shutdown(ctx) on every handler that has one and stops
// dispatching new runs. It is idempotent: later calls return nil.
func (m *Manager) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	var err error
	m.shutdownOnce.Do(func() {
		m.regMu.Lock()
		var hs []Handler
		if p := m.handlers.Swap(nil); p != nil {
			hs = *p
		}
		m.regMu.Unlock()
		var errs []error
		for _, h := range hs {
			s, ok := h.(interface{ Shutdown(context.Context) error })
			if !ok {
				continue
			}
			if e := m.safeEnd(h, "Shutdown", func() error { return s.Shutdown(ctx) }); e != nil {
				errs = append(errs, fmt.Errorf("observability: shutdown %T: %w", h, e))
			}
		}
		err = errors.Join(errs...)
	})
	return err
}

func (m *Manager) snapshot() []Handler {
	if m == nil {
		return nil
	}
	if p := m.handlers.Load(); p != nil {
		return *p
	}
	return nil
}

// start creates the run and lets every handler decorate its context.
func (m *Manager) start(ctx context.Context, kind Kind, name, session string, op string,
	call func(h Handler, ctx context.Context) (context.Context, error)) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	hs := m.snapshot()
	if len(hs) == 0 {
		return ctx
	}
	r := m.newRun(ctx, hs, kind, name, session)
	var c context.Context = r
	for _, h := range hs {
		c = m.safeStart(h, op, c, call)
	}
	if got, _ := c.Value(runCtxKey{}).(*run); got != r {
		// A handler returned a context not derived from the one it got.
		m.logf(op, "handler returned a context that lost the run; its values are dropped")
		c = r
	}
	r.hctx = c
	return c
}

// claim finds the run of the given kind that ctx carries and marks it ended.
// It returns nil when there is nothing to end.
func (m *Manager) claim(ctx context.Context, kind Kind, op string) *run {
	if m == nil || ctx == nil {
		return nil
	}
	r, _ := ctx.Value(runCtxKey{}).(*run)
	if r == nil {
		return nil
	}
	inner := r
	for r != nil && (r.Kind != kind || r.m != m) {
		r = r.parent
	}
	if r == nil {
		m.logf(op, "no open "+kind.String()+" run in context (innermost is "+inner.Kind.String()+")")
		return nil
	}
	if r != inner && !inner.ended.Load() {
		m.logf(op, "ending a "+kind.String()+" run whose "+inner.Kind.String()+" child is still open; the child is ended too")
	}
	if !r.ended.CompareAndSwap(false, true) {
		return nil // already ended: harmless
	}
	r.closeChildren()
	return r
}

// end ends the run of kind that ctx carries: call for every handler of
// the run, then the run leaves its parent. op names the event in logs.
func (m *Manager) end(ctx context.Context, kind Kind, op string, call func(h Handler, ctx context.Context) error) {
	r := m.claim(ctx, kind, op)
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, op, func() error { return call(h, r.hctx) })
	}
	r.unlink()
}

// fail ends the run of kind that ctx carries with err (see dispatchError).
func (m *Manager) fail(ctx context.Context, kind Kind, op string, err error) {
	if r := m.claim(ctx, kind, op); r != nil {
		m.dispatchError(r, orUnknown(err))
	}
}

func (m *Manager) dispatchError(r *run, err error) {
	ctx := r.hctx
	if ctx == nil {
		ctx = r
	}
	for _, h := range r.handlers {
		switch r.Kind {
		case KindChain:
			m.safeEnd(h, "ChainError", func() error { return h.ChainError(ctx, err) })
		case KindAgent:
			m.safeEnd(h, "AgentError", func() error { return h.AgentError(ctx, err) })
		case KindLLM:
			m.safeEnd(h, "LLMError", func() error { return h.LLMError(ctx, err) })
		case KindTool:
			m.safeEnd(h, "ToolError", func() error { return h.ToolError(ctx, err) })
		case KindMessage:
			msg := Message{Role: r.Name}
			m.safeEnd(h, "MessageEnd", func() error { return h.MessageEnd(ctx, msg) })
		case KindSandbox:
			if sh, ok := h.(SandboxHandler); ok {
				m.safeEnd(h, "SandboxError", func() error { return sh.SandboxError(ctx, err) })
			}
		}
	}
	r.unlink()
}

var errNilError = errors.New("observability: error event with a nil error")

func orUnknown(err error) error {
	if err == nil {
		return errNilError
	}
	return err
}

// ---- handler isolation ----

func (m *Manager) safeStart(h Handler, op string, ctx context.Context,
	call func(h Handler, ctx context.Context) (context.Context, error)) (out context.Context) {
	out = ctx
	defer func() {
		if p := recover(); p != nil {
			out = ctx
			m.logPanic(h, op, p)
		}
	}()
	c, err := call(h, ctx)
	if err != nil {
		m.logErr(h, op, err)
	}
	if c != nil {
		out = c
	}
	return out
}

func (m *Manager) safeEnd(h Handler, op string, call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			m.logPanic(h, op, p)
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if err = call(); err != nil {
		m.logErr(h, op, err)
	}
	return err
}

func (m *Manager) logPanic(h Handler, op string, p any) {
	key := fmt.Sprintf("%T/%s/panic", h, op)
	if ok, n := m.lim.allow(key); ok {
		m.log.Error("observability: handler panicked",
			"handler", fmt.Sprintf("%T", h), "event", op, "panic", fmt.Sprint(p),
			"suppressed", n, "stack", string(debug.Stack()))
	}
}

func (m *Manager) logErr(h Handler, op string, err error) {
	key := fmt.Sprintf("%T/%s/error", h, op)
	if ok, n := m.lim.allow(key); ok {
		m.log.Warn("observability: handler failed",
			"handler", fmt.Sprintf("%T", h), "event", op, "error", err, "suppressed", n)
	}
}

func (m *Manager) logf(op, msg string) {
	key := "misuse/" + op
	if ok, n := m.lim.allow(key); ok {
		m.log.Warn("observability: "+msg, "event", op, "suppressed", n)
	}
}

type limiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether a record for key may be logged now, and how many
// were suppressed since the last one.
func (l *limiter) allow(key string) (bool, int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = make(map[string]time.Time)
		l.suppressed = make(map[string]int)
	}
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		l.suppressed[key]++
		return false, 0
	}
	n := l.suppressed[key]
	delete(l.suppressed, key)
	l.last[key] = now
	return true, n
}

// ---- the events ----

// ChainStart starts a chain (one user turn) and returns the context that
// carries it. Pass that context to ChainEnd or ChainError.
func (m *Manager) ChainStart(ctx context.Context, info ChainInfo) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindChain, info.Name, info.SessionID, "ChainStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.ChainStart(c, info) })
}

// ChainEnd ends the chain carried by ctx.
func (m *Manager) ChainEnd(ctx context.Context, res ChainResult) {
	m.end(ctx, KindChain, "ChainEnd", func(h Handler, c context.Context) error { return h.ChainEnd(c, res) })
}

// ChainError ends the chain carried by ctx with an error.
func (m *Manager) ChainError(ctx context.Context, err error) {
	m.fail(ctx, KindChain, "ChainError", err)
}

// AgentStart starts an agent run and returns the context that carries it.
func (m *Manager) AgentStart(ctx context.Context, info AgentInfo) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindAgent, info.Name, info.SessionID, "AgentStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.AgentStart(c, info) })
}

// AgentEnd ends the agent run carried by ctx.
func (m *Manager) AgentEnd(ctx context.Context, res AgentResult) {
	m.end(ctx, KindAgent, "AgentEnd", func(h Handler, c context.Context) error { return h.AgentEnd(c, res) })
}

// AgentError ends the agent run carried by ctx with an error.
func (m *Manager) AgentError(ctx context.Context, err error) {
	m.fail(ctx, KindAgent, "AgentError", err)
}

// LLMStart starts a model call and returns the context that carries it.
func (m *Manager) LLMStart(ctx context.Context, req LLMRequest) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindLLM, req.Model, req.SessionID, "LLMStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.LLMStart(c, req) })
}

// LLMEnd ends the model call carried by ctx.
func (m *Manager) LLMEnd(ctx context.Context, resp LLMResponse) {
	m.end(ctx, KindLLM, "LLMEnd", func(h Handler, c context.Context) error { return h.LLMEnd(c, resp) })
}

// LLMError ends the model call carried by ctx with an error.
func (m *Manager) LLMError(ctx context.Context, err error) {
	m.fail(ctx, KindLLM, "LLMError", err)
}

// ToolStart starts a tool call and returns the context that carries it.
func (m *Manager) ToolStart(ctx context.Context, call ToolCall) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindTool, call.Name, call.SessionID, "ToolStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.ToolStart(c, call) })
}

// ToolEnd ends the tool call carried by ctx.
func (m *Manager) ToolEnd(ctx context.Context, res ToolResult) {
	m.end(ctx, KindTool, "ToolEnd", func(h Handler, c context.Context) error { return h.ToolEnd(c, res) })
}

// ToolError ends the tool call carried by ctx with an error.
func (m *Manager) ToolError(ctx context.Context, err error) {
	m.fail(ctx, KindTool, "ToolError", err)
}

// MessageStart starts a message (for example a streamed assistant message)
// and returns the context that carries it.
func (m *Manager) MessageStart(ctx context.Context, msg Message) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindMessage, msg.Role, "", "MessageStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.MessageStart(c, msg) })
}

// MessageEnd ends the message carried by ctx.
func (m *Manager) MessageEnd(ctx context.Context, msg Message) {
	m.end(ctx, KindMessage, "MessageEnd", func(h Handler, c context.Context) error { return h.MessageEnd(c, msg) })
}
