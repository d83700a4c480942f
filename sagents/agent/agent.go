package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/tools"
)

// DefaultMaxSteps bounds the model calls of one Run.
const DefaultMaxSteps = 20

// DefaultSystemPrompt is used when Config.SystemPrompt is empty.
const DefaultSystemPrompt = `You are a careful software agent working in a sandboxed workspace at %s.
Use the tools to inspect files, write code and run commands; do not guess what a command prints, run it.
Keep answers short and say what you did.`

// ErrMaxSteps is returned when the model still calls tools after MaxSteps
// model calls.
// Its error type, for traces, is "max_steps".
var ErrMaxSteps error = maxStepsError{}

type maxStepsError struct{}

func (maxStepsError) Error() string     { return "agent: step limit reached without a final answer" }
func (maxStepsError) ErrorType() string { return "max_steps" }

// Config configures an [Agent].
type Config struct {
	// Client calls the model. Give it the same Observer to see model calls
	// in the trace.
	Client *llm.Client
	// Tools runs tool calls. Give it the same Observer too.
	Tools *tools.Manager
	// Observer receives the chain, agent and message events.
	Observer *observability.Manager

	Name      string // agent name; default "sage"
	SessionID string
	// SystemPrompt; empty means DefaultSystemPrompt with the workspace.
	SystemPrompt string
	// Skills, when set, adds the skills block to the system prompt.
	Skills    *tools.SkillManager
	MaxSteps  int // default DefaultMaxSteps
	ModelType llm.ModelType
	// Temperature, when set, is sent even when zero.
	Temperature *float32

	// Output receives assistant text as it streams in; nil discards it.
	Output io.Writer
	// Log receives one line per tool call and result; nil discards it.
	Log io.Writer

	// Checkpoints takes a checkpoint of the sandbox's files before the
	// first turn (turn 0) and after each turn that ran tools
	// (sandbox.Sandbox.CheckpointTurn: a turn that changed no file makes
	// no new checkpoint, the last one gets its number), so that a turn
	// can be undone: sage session rollback S --turn N, the undo tool. It
	// needs a sandbox with checkpoints on (local mode,
	// sandbox.local.checkpoints); New refuses others. Turns are numbered
	// across the runs of one sandbox: a later Run goes on after the last
	// turn it finds.
	Checkpoints bool
}

// TurnCheckpointer is what Config.Checkpoints needs of the tools'
// sandbox; *sandbox.Sandbox has it.
type TurnCheckpointer interface {
	CheckpointTurn(ctx context.Context, turn int) (sandbox.Checkpoint, error)
	Checkpoint(ctx context.Context) (sandbox.Checkpoint, error)
	Checkpoints(ctx context.Context) ([]sandbox.Checkpoint, error)
}

// Agent runs tasks. It is safe for concurrent use; each Run has its own
// conversation.
type Agent struct {
	cfg Config
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Client == nil || cfg.Tools == nil {
		return nil, errors.New("agent: Config.Client and Config.Tools are required")
	}
	if cfg.Checkpoints {
		if _, ok := cfg.Tools.Sandbox().(TurnCheckpointer); !ok {
			return nil, errors.New("agent: Config.Checkpoints needs a sandbox with checkpoints (*sandbox.Sandbox in local mode with sandbox.local.checkpoints on)")
		}
	}
	if cfg.Name == "" {
		cfg.Name = "sage"
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return &Agent{cfg: cfg}, nil
}

// ToolCall records one tool call of a run.
type ToolCall struct {
	Step      int
	ID        string
	Name      string
	Arguments string
	Result    string
	Err       error
}

// Result is the outcome of a Run.
type Result struct {
	Answer    string
	Steps     int // model calls made
	ToolCalls []ToolCall
	// Messages is the conversation as sent to the model, the answer last
	// (llm.Message is go-openai's ChatCompletionMessage).
	Messages []llm.Message
	Usage    llm.Usage
	// Checkpoints are the checkpoints Config.Checkpoints took, in turn
	// order (one per turn; a turn that changed nothing has the last one
	// again). A failed one is left out and logged.
	Checkpoints []sandbox.Checkpoint
}

// SystemPrompt returns the system prompt a Run sends.
func (a *Agent) SystemPrompt() string {
	h := a.cfg.Tools.Sandbox()
	p := a.cfg.SystemPrompt
	if p == "" {
		p = fmt.Sprintf(DefaultSystemPrompt, h.WorkspacePath())
	}
	if s := a.cfg.Skills.Prompt(h); s != "" {
		p += "\n\n" + s
	}
	return p
}

// Run runs one task to a final answer. The returned Result holds what was
// done even when err is not nil.
func (a *Agent) Run(ctx context.Context, task string) (res *Result, err error) {
	obs := a.cfg.Observer
	in := []observability.Message{{Role: openai.ChatMessageRoleUser, Content: task}}
	ctx, end := obs.StartAgent(ctx, observability.AgentInfo{SessionID: a.cfg.SessionID, Name: a.cfg.Name, Inputs: in,
		Provider: a.cfg.Client.Provider(a.cfg.ModelType), Model: a.cfg.Client.Model(a.cfg.ModelType)})
	res = &Result{}
	defer func() {
		end([]observability.Message{{Role: openai.ChatMessageRoleAssistant, Content: res.Answer}}, err)
	}()
	mctx := obs.MessageStart(ctx, in[0])
	obs.MessageEnd(mctx, in[0])
	res.Messages = []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: a.SystemPrompt()},
		{Role: openai.ChatMessageRoleUser, Content: task},
	}
	first, err := a.startTurns(ctx, res)
	if err != nil {
		return res, err
	}
	for step := 1; step <= a.cfg.MaxSteps; step++ {
		res.Steps = step
		msg, calls, err := a.callModel(ctx, res)
		if err != nil {
			return res, err
		}
		res.Messages = append(res.Messages, msg)
		if len(calls) == 0 {
			res.Answer = msg.Content
			return res, nil
		}
		for _, tc := range a.runTools(ctx, step, calls) {
			res.ToolCalls = append(res.ToolCalls, tc)
			res.Messages = append(res.Messages, openai.ChatCompletionMessage{
				Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: tc.Result})
		}
		a.checkpointTurn(ctx, res, first+step)
	}
	return res, fmt.Errorf("%w (max steps %d)", ErrMaxSteps, a.cfg.MaxSteps)
}

// startTurns numbers this run's turns and saves the state before them
// (Config.Checkpoints): turn 0 in a sandbox without turns yet; else the
// run goes on after the last turn found, from a plain checkpoint of the
// state it starts in. It returns the number before this run's first turn.
func (a *Agent) startTurns(ctx context.Context, res *Result) (int, error) {
	if !a.cfg.Checkpoints {
		return 0, nil
	}
	ck := a.cfg.Tools.Sandbox().(TurnCheckpointer)
	list, err := ck.Checkpoints(ctx)
	if err != nil {
		return 0, fmt.Errorf("agent: checkpoints: %w", err)
	}
	last := -1
	for _, c := range list {
		for _, t := range c.Turns {
			last = max(last, t)
		}
	}
	if last < 0 {
		cp, err := ck.CheckpointTurn(ctx, 0)
		if err != nil {
			return 0, fmt.Errorf("agent: checkpoint before the first turn: %w", err)
		}
		res.Checkpoints = append(res.Checkpoints, cp)
		fmt.Fprintf(a.cfg.Log, "  checkpoint %s: before the first turn (turn 0)\n", cp.ID)
		return 0, nil
	}
	if _, err := ck.Checkpoint(ctx); err != nil {
		return 0, fmt.Errorf("agent: checkpoint before turn %d: %w", last+1, err)
	}
	return last, nil
}

// checkpointTurn saves the state after turn (Config.Checkpoints). A
// failure (a background task writing, say) is logged and the run goes
// on: that turn has no checkpoint to roll back to.
func (a *Agent) checkpointTurn(ctx context.Context, res *Result, turn int) {
	if !a.cfg.Checkpoints {
		return
	}
	cp, err := a.cfg.Tools.Sandbox().(TurnCheckpointer).CheckpointTurn(ctx, turn)
	if err != nil {
		fmt.Fprintf(a.cfg.Log, "  checkpoint after turn %d failed (the turn cannot be rolled back to): %s\n", turn, firstLine(err.Error()))
		return
	}
	res.Checkpoints = append(res.Checkpoints, cp)
	what := fmt.Sprintf("%d bytes changed", cp.Size)
	if len(cp.Turns) > 1 && cp.Turns[0] != turn {
		what = "no change"
	}
	fmt.Fprintf(a.cfg.Log, "  checkpoint %s: after turn %d (%s)\n", cp.ID, turn, what)
}

// callModel streams one model call, writing its text to Output.
func (a *Agent) callModel(ctx context.Context, res *Result) (openai.ChatCompletionMessage, []llm.ToolCall, error) {
	req := llm.Request{ModelType: a.cfg.ModelType, Temperature: a.cfg.Temperature}
	req.Messages = res.Messages
	req.Tools = a.cfg.Tools.Definitions()
	// The system prompt (with the skills block) and the tool list are the
	// same on every call of a session: the cached prefix. They are built
	// without timestamps or random ids, and tools come sorted by name.
	req.Stability = stableSystem
	req.ToolsStability = llm.Stable
	req.CacheKey = a.cfg.SessionID
	s, err := a.cfg.Client.ChatStream(ctx, req)
	if err != nil {
		return openai.ChatCompletionMessage{}, nil, err
	}
	mctx := a.cfg.Observer.MessageStart(ctx, observability.Message{Role: openai.ChatMessageRoleAssistant})
	wrote := false
	resp, err := s.CollectDeltas(func(content, _ string) error {
		if content != "" {
			io.WriteString(a.cfg.Output, content)
			wrote = true
		}
		return nil
	})
	if err != nil {
		a.cfg.Observer.MessageEnd(mctx, observability.Message{Role: openai.ChatMessageRoleAssistant})
		return openai.ChatCompletionMessage{}, nil, err
	}
	if wrote {
		io.WriteString(a.cfg.Output, "\n")
	}
	res.Usage = res.Usage.Add(resp.Usage)
	if len(resp.Choices) == 0 {
		a.cfg.Observer.MessageEnd(mctx, observability.Message{Role: openai.ChatMessageRoleAssistant})
		return openai.ChatCompletionMessage{}, nil, errors.New("agent: the model returned no choices")
	}
	ch := resp.Choices[0]
	a.cfg.Observer.MessageEnd(mctx, observability.Message{Role: openai.ChatMessageRoleAssistant, Content: ch.Message.Content})
	return ch.Message, ch.ToolCalls, nil
}

// stableSystem marks the first message, the system prompt, as Stable; the
// conversation after it is unmarked. It is never modified.
var stableSystem = []llm.Stability{llm.Stable}

// runTools runs the calls concurrently and returns them in order.
func (a *Agent) runTools(ctx context.Context, step int, calls []llm.ToolCall) []ToolCall {
	out := make([]ToolCall, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		out[i] = ToolCall{Step: step, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
		args := c.Arguments
		if c.ArgumentsErr != nil {
			// The Manager rejects it with an invalid_arguments error the
			// model can read, and reports the failed call.
			args, out[i].Arguments = json.RawMessage(c.Raw), c.Raw
		}
		wg.Go(func() {
			text, err := a.cfg.Tools.Do(ctx, tools.Call{ID: c.ID, Name: c.Name, Arguments: args})
			out[i].Result, out[i].Err = text, err
		})
	}
	wg.Wait()
	for _, tc := range out {
		status := "ok"
		if tc.Err != nil {
			status = "error: " + firstLine(tc.Err.Error())
		}
		fmt.Fprintf(a.cfg.Log, "  -> %s %s  [%s]\n", tc.Name, clipArgs(tc.Arguments), status)
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func clipArgs(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		i := 100
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		return s[:i] + "..."
	}
	return s
}
