package observability

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// ConsoleHandler prints the tree of a finished chain (names, durations,
// token counts, errors) to a writer, stderr by default. It is the handler for
// when no collector is running. Each tree is written with a single Write
// when its root run ends.
type ConsoleHandler struct {
	Base

	w        io.Writer
	messages bool

	mu    sync.Mutex
	nodes map[uint64]*consoleNode
	wmu   sync.Mutex
}

// ConsoleOptions configures a [ConsoleHandler]. The zero value prints
// chains, agents, model calls and tools.
type ConsoleOptions struct {
	// Messages also lists message runs in the tree.
	Messages bool
}

// NewConsoleHandler returns a handler printing to w (os.Stderr when nil).
func NewConsoleHandler(w io.Writer, opts ConsoleOptions) *ConsoleHandler {
	if w == nil {
		w = os.Stderr
	}
	return &ConsoleHandler{w: w, nodes: make(map[uint64]*consoleNode), messages: opts.Messages}
}

type consoleNode struct {
	run      Run
	label    string
	dur      time.Duration
	done     bool
	detail   string
	err      error
	children []*consoleNode
}

func (h *ConsoleHandler) begin(ctx context.Context, label string) (context.Context, error) {
	r, ok := RunFromContext(ctx)
	if !ok {
		return ctx, nil
	}
	n := &consoleNode{run: r, label: label}
	h.mu.Lock()
	h.nodes[r.ID] = n
	if p := h.nodes[r.ParentID]; p != nil && r.ParentID != 0 {
		p.children = append(p.children, n)
	}
	h.mu.Unlock()
	return ctx, nil
}

func (h *ConsoleHandler) finish(ctx context.Context, detail string, err error) error {
	r, ok := RunFromContext(ctx)
	if !ok {
		return nil
	}
	h.mu.Lock()
	n := h.nodes[r.ID]
	if n == nil {
		h.mu.Unlock()
		return nil
	}
	n.dur = time.Since(r.Start)
	n.done = true
	n.detail = detail
	n.err = err
	if r.ParentID != 0 && h.nodes[r.ParentID] != nil {
		h.mu.Unlock()
		return nil
	}
	// A root ended: render it and forget its nodes.
	var b strings.Builder
	h.render(&b, n, "", "", true)
	h.forget(n)
	h.mu.Unlock()

	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, werr := io.WriteString(h.w, b.String())
	return werr
}

func (h *ConsoleHandler) forget(n *consoleNode) {
	delete(h.nodes, n.run.ID)
	for _, c := range n.children {
		h.forget(c)
	}
}

func (h *ConsoleHandler) render(b *strings.Builder, n *consoleNode, first, rest string, root bool) {
	b.WriteString(first)
	b.WriteString(n.label)
	if root && n.run.SessionID != "" {
		fmt.Fprintf(b, "  session=%s", n.run.SessionID)
	}
	if n.done {
		b.WriteString("  ")
		b.WriteString(fmtDur(n.dur))
	} else {
		b.WriteString("  (still open)")
	}
	if n.detail != "" {
		b.WriteString("  ")
		b.WriteString(n.detail)
	}
	if n.err != nil {
		// The message once, on the span where it happened: an ancestor
		// that failed with the same error says only that it failed.
		if n.childFailedWith(n.err) {
			fmt.Fprintf(b, "  ERROR[%s]", ErrorType(n.err))
		} else {
			fmt.Fprintf(b, "  ERROR[%s]: %v", ErrorType(n.err), n.err)
		}
	}
	b.WriteByte('\n')
	kids := n.children
	if !h.messages {
		kids = kids[:0:0]
		for _, c := range n.children {
			if c.run.Kind != KindMessage {
				kids = append(kids, c)
			}
		}
	}
	for i, c := range kids {
		if i == len(kids)-1 {
			h.render(b, c, rest+"└─ ", rest+"   ", false)
		} else {
			h.render(b, c, rest+"├─ ", rest+"│  ", false)
		}
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

func (h *ConsoleHandler) ChainStart(ctx context.Context, i ChainInfo) (context.Context, error) {
	return h.begin(ctx, join("invoke_workflow", i.Name))
}
func (h *ConsoleHandler) ChainEnd(ctx context.Context, _ ChainResult) error {
	return h.finish(ctx, "", nil)
}
func (h *ConsoleHandler) ChainError(ctx context.Context, err error) error {
	return h.finish(ctx, "", err)
}
func (h *ConsoleHandler) AgentStart(ctx context.Context, i AgentInfo) (context.Context, error) {
	l := join("invoke_agent", i.Name)
	if i.Step != "" {
		l += " (" + i.Step + ")"
	}
	return h.begin(ctx, l)
}
func (h *ConsoleHandler) AgentEnd(ctx context.Context, _ AgentResult) error {
	return h.finish(ctx, "", nil)
}
func (h *ConsoleHandler) AgentError(ctx context.Context, err error) error {
	return h.finish(ctx, "", err)
}
func (h *ConsoleHandler) LLMStart(ctx context.Context, r LLMRequest) (context.Context, error) {
	l := join("chat", r.Model)
	if r.ModelType != "" {
		l += " [" + string(r.ModelType) + "]"
	}
	return h.begin(ctx, l)
}
func (h *ConsoleHandler) LLMEnd(ctx context.Context, r LLMResponse) error {
	var parts []string
	u := r.Usage
	if u.InputTokens != 0 || u.OutputTokens != 0 {
		parts = append(parts, fmt.Sprintf("tokens in=%d out=%d", u.InputTokens, u.OutputTokens))
	}
	if u.CacheReadInputTokens != 0 {
		parts = append(parts, fmt.Sprintf("cached=%d", u.CacheReadInputTokens))
	}
	if u.ReasoningTokens != 0 {
		parts = append(parts, fmt.Sprintf("reasoning=%d", u.ReasoningTokens))
	}
	if r.TimeToFirstChunk > 0 {
		parts = append(parts, "ttfc="+fmtDur(r.TimeToFirstChunk))
	}
	if len(r.FinishReasons) > 0 {
		parts = append(parts, "finish="+strings.Join(r.FinishReasons, ","))
	}
	return h.finish(ctx, strings.Join(parts, " "), nil)
}
func (h *ConsoleHandler) LLMError(ctx context.Context, err error) error {
	return h.finish(ctx, "", err)
}
func (h *ConsoleHandler) ToolStart(ctx context.Context, c ToolCall) (context.Context, error) {
	return h.begin(ctx, join("execute_tool", c.Name))
}
func (h *ConsoleHandler) ToolEnd(ctx context.Context, _ ToolResult) error {
	return h.finish(ctx, "", nil)
}
func (h *ConsoleHandler) ToolError(ctx context.Context, err error) error {
	return h.finish(ctx, "", err)
}
func (h *ConsoleHandler) MessageStart(ctx context.Context, m Message) (context.Context, error) {
	return h.begin(ctx, join("message", m.Role))
}
func (h *ConsoleHandler) MessageEnd(ctx context.Context, _ Message) error {
	return h.finish(ctx, "", nil)
}

func join(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

// childFailedWith reports whether a descendant ended with the same error
// (an error with the same text).
func (n *consoleNode) childFailedWith(err error) bool {
	for _, c := range n.children {
		if c.err != nil && c.err.Error() == err.Error() || c.childFailedWith(err) {
			return true
		}
	}
	return false
}
