// Command custom_handler shows a custom observability handler: it embeds
// observability.Base, overrides only the events it cares about (model-call
// ends and tool errors) and keeps a token bill per session. A console
// handler prints each finished turn as a tree on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/sage-go/sage/sagents/observability"
)

// tokenBill sums token usage per session and counts failed tool calls.
type tokenBill struct {
	observability.Base // no-op for everything not overridden below

	mu         sync.Mutex
	tokens     map[string]int64
	toolErrors map[string]int
}

func newTokenBill() *tokenBill {
	return &tokenBill{tokens: map[string]int64{}, toolErrors: map[string]int{}}
}

// LLMEnd is called once per successful model call, with the context that
// LLMStart returned: RunFromContext gives the session the call belongs to.
func (b *tokenBill) LLMEnd(ctx context.Context, resp observability.LLMResponse) error {
	run, _ := observability.RunFromContext(ctx)
	b.mu.Lock()
	b.tokens[run.SessionID] += resp.Usage.InputTokens + resp.Usage.OutputTokens
	b.mu.Unlock()
	return nil
}

// ToolError counts failed tool calls by tool name.
func (b *tokenBill) ToolError(ctx context.Context, err error) error {
	run, _ := observability.RunFromContext(ctx)
	b.mu.Lock()
	b.toolErrors[run.Name]++
	b.mu.Unlock()
	return nil
}

func (b *tokenBill) print(w io.Writer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sessions := make([]string, 0, len(b.tokens))
	for s := range b.tokens {
		sessions = append(sessions, s)
	}
	sort.Strings(sessions)
	for _, s := range sessions {
		fmt.Fprintf(w, "session %s: %d tokens\n", s, b.tokens[s])
	}
	for tool, n := range b.toolErrors {
		fmt.Fprintf(w, "tool %s: %d failed call(s)\n", tool, n)
	}
}

// turn plays one user turn the way the agent, llm client and tools manager
// emit it.
func turn(m *observability.Manager, session string, tokens int64, failTool bool) {
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: session, Name: "chat-turn"})
	defer m.ChainEnd(ctx, observability.ChainResult{}) // harmless if an error ended it first

	actx := m.AgentStart(ctx, observability.AgentInfo{Name: "assistant"})
	lctx := m.LLMStart(actx, observability.LLMRequest{Model: "gpt-4o-mini", ModelType: observability.ModelFast})
	m.LLMEnd(lctx, observability.LLMResponse{FinishReasons: []string{"tool_calls"},
		Usage: observability.Usage{InputTokens: tokens, OutputTokens: tokens / 4}})

	tctx := m.ToolStart(actx, observability.ToolCall{Name: "read_file", CallID: "call-1"})
	if failTool {
		m.ToolError(tctx, errors.New("read_file: no such file"))
	} else {
		m.ToolEnd(tctx, observability.ToolResult{Result: "…"})
	}
	m.AgentEnd(actx, observability.AgentResult{})
}

func run(stdout, stderr io.Writer) {
	bill := newTokenBill()
	m := observability.New(observability.Options{Handlers: []observability.Handler{bill, observability.NewConsoleHandler(stderr, observability.ConsoleOptions{})}})
	defer m.Shutdown(context.Background())

	turn(m, "alice", 400, false)
	turn(m, "bob", 100, true)
	turn(m, "alice", 200, false)
	bill.print(stdout)
}

func main() { run(os.Stdout, os.Stderr) }
