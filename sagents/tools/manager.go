package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	openai "github.com/sashabaranov/go-openai"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// DefaultMaxResultTokens bounds a tool result the model reads.
const DefaultMaxResultTokens = 12000

// bytesPerToken is the estimate used to turn a token budget into bytes.
const bytesPerToken = 4

// outputDir is where the Manager keeps the full text of results it cut,
// relative to the workspace.
const outputDir = ".sage/tool-output"

// Options configure a [Manager].
type Options struct {
	// Observer receives a tool start and a tool end or error event for
	// every call. nil reports nothing.
	Observer *observability.Manager
	// MaxResultTokens bounds each result (estimated at 4 bytes
	// a token); 0 means DefaultMaxResultTokens.
	MaxResultTokens int
	// NoSaveFullOutput keeps the Manager from writing the full text of a
	// cut result to .sage/tool-output in the sandbox.
	NoSaveFullOutput bool
}

// Manager holds the tools of one sandbox, validates arguments, runs calls,
// bounds results and reports every call to the Observer. It is safe for
// concurrent use.
type Manager struct {
	h    Sandbox
	opts Options

	mu    sync.RWMutex
	tools map[string]*entry
	seq   atomic.Uint64
}

type entry struct {
	tool   Tool
	schema *jsonschema.Schema
}

// NewManager returns a Manager whose tools run against h.
func NewManager(h Sandbox, opts Options) *Manager {
	if opts.MaxResultTokens <= 0 {
		opts.MaxResultTokens = DefaultMaxResultTokens
	}
	return &Manager{h: h, opts: opts, tools: map[string]*entry{}}
}

// Sandbox returns the sandbox the tools run against.
func (m *Manager) Sandbox() Sandbox { return m.h }

// Register adds tools. A duplicate name or a schema that does not compile
// is an error, and nothing is registered.
func (m *Manager) Register(ts ...Tool) error {
	add := make(map[string]*entry, len(ts))
	for _, t := range ts {
		sch, err := compileSchema(t.Name(), t.Schema())
		if err != nil {
			return err
		}
		add[t.Name()] = &entry{tool: t, schema: sch}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range add {
		if _, dup := m.tools[name]; dup {
			return fmt.Errorf("tools: %q is already registered", name)
		}
	}
	for name, e := range add {
		m.tools[name] = e
	}
	return nil
}

func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tools: %s: schema: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "sage://tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tools: %s: schema: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tools: %s: schema: %w", name, err)
	}
	return sch, nil
}

// Names lists the registered tools, sorted.
func (m *Manager) Names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.tools))
}

// Spec describes one registered tool as a model sees it: what an agent
// framework needs to offer the tool in its own terms.
type Spec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// Specs lists the registered tools, sorted by name.
func (m *Manager) Specs() []Spec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Spec, 0, len(m.tools))
	for _, n := range m.namesLocked() {
		t := m.tools[n].tool
		out = append(out, Spec{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return out
}

// Definitions lists the tools as OpenAI tool definitions, sorted by name.
func (m *Manager) Definitions() []openai.Tool {
	specs := m.Specs()
	out := make([]openai.Tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: s.Parameters,
		}})
	}
	return out
}

func (m *Manager) namesLocked() []string { return slices.Sorted(maps.Keys(m.tools)) }

// Call is one tool call as the model made it.
type Call struct {
	ID        string // the model's tool call id; may be empty
	Name      string
	Arguments json.RawMessage
}

// Run calls the tool name with args; see [Manager.Do].
func (m *Manager) Run(ctx context.Context, name string, args json.RawMessage) (string, error) {
	return m.Do(ctx, Call{Name: name, Arguments: args})
}

// Do runs one call and returns the text to send back to the model, which is
// set even when the call failed: a failure is the JSON of an [*Error], and
// the error is returned too. The result is bounded to MaxResultTokens.
func (m *Manager) Do(ctx context.Context, c Call) (string, error) {
	var desc string
	if m.opts.Observer != nil {
		m.mu.RLock()
		if e := m.tools[c.Name]; e != nil {
			desc = e.tool.Description()
		}
		m.mu.RUnlock()
	}
	ctx = m.opts.Observer.ToolStart(ctx, observability.ToolCall{Name: c.Name, Description: desc, CallID: c.ID, Arguments: string(c.Arguments)})
	text, err := m.do(ctx, c)
	if err != nil {
		te := AsError(err)
		m.opts.Observer.ToolError(ctx, te)
		return te.JSON(), te
	}
	text = m.bound(ctx, c, text)
	m.opts.Observer.ToolEnd(ctx, observability.ToolResult{Result: text})
	return text, nil
}

func (m *Manager) do(ctx context.Context, c Call) (string, error) {
	m.mu.RLock()
	e := m.tools[c.Name]
	m.mu.RUnlock()
	if e == nil {
		return "", &Error{Code: CodeUnknownTool, Message: fmt.Sprintf("no tool named %q", c.Name),
			Hint: "available tools: " + strings.Join(m.Names(), ", ")}
	}
	args := c.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if err := validate(e.schema, args); err != nil {
		return "", err
	}
	res, err := e.tool.Run(ctx, m.h, args)
	if err != nil {
		return "", err
	}
	return res.Text, nil
}

var printer = message.NewPrinter(language.English)

// validate checks args against the schema and explains every violation.
func validate(sch *jsonschema.Schema, args json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &Error{Code: CodeInvalidArguments, Message: "arguments are not valid JSON: " + err.Error(),
			Hint: "send one JSON object", Err: err}
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return &Error{Code: CodeInvalidArguments, Message: err.Error(), Err: err}
	}
	var msgs []string
	leaves(ve, func(l *jsonschema.ValidationError) {
		loc := "/" + strings.Join(l.InstanceLocation, "/")
		msgs = append(msgs, fmt.Sprintf("at %s: %s", loc, l.ErrorKind.LocalizedString(printer)))
	})
	return &Error{Code: CodeInvalidArguments, Message: strings.Join(msgs, "; "),
		Hint: "fix the arguments to match the tool's parameters schema and call it again", Err: err}
}

func leaves(e *jsonschema.ValidationError, f func(*jsonschema.ValidationError)) {
	if len(e.Causes) == 0 {
		f(e)
		return
	}
	for _, c := range e.Causes {
		leaves(c, f)
	}
}

// bound cuts text to the budget, saving the full text in the sandbox first.
func (m *Manager) bound(ctx context.Context, c Call, text string) string {
	limit := m.opts.MaxResultTokens * bytesPerToken
	if len(text) <= limit {
		return text
	}
	saved := ""
	if !m.opts.NoSaveFullOutput {
		id := c.ID
		if id == "" || !driver.ValidID(id) {
			id = fmt.Sprintf("call-%d", m.seq.Add(1))
		}
		p := outputDir + "/" + c.Name + "-" + id + ".txt"
		if err := m.h.WriteFile(ctx, p, []byte(text), sandbox.WriteOptions{}); err == nil {
			saved = p
		}
	}
	return boundText(text, limit, saved)
}
