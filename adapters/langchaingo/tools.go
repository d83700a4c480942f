package langchaingosage

import (
	"context"
	"encoding/json"

	lctools "github.com/tmc/langchaingo/tools"

	"github.com/sage-go/sage/sagents/tools"
)

// Tool is one tool of a tools.Manager as a LangChainGo tools.Tool.
type Tool struct {
	m    *tools.Manager
	spec tools.Spec
}

var _ lctools.Tool = (*Tool)(nil)

// Tools returns every tool registered with m (sorted by name) as
// LangChainGo tools. Tools registered with m later are not included.
func Tools(m *tools.Manager) []lctools.Tool {
	specs := m.Specs()
	out := make([]lctools.Tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, &Tool{m: m, spec: s})
	}
	return out
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Description is the tool's description followed by the JSON Schema its
// input must match: agents that show the model only a description
// (LangChainGo's text agents) tell it that way how to call the tool.
func (t *Tool) Description() string {
	return t.spec.Description + "\nInput: a JSON object matching this JSON Schema: " + string(t.spec.Parameters)
}

// Call runs the call with input as the JSON arguments, through the
// Manager. A failed call's result is the JSON of its tools.Error (for the
// model to read) and err is nil, unless ctx is done.
func (t *Tool) Call(ctx context.Context, input string) (string, error) {
	text, err := t.m.Do(ctx, tools.Call{Name: t.spec.Name, Arguments: json.RawMessage(input)})
	if err != nil && ctx.Err() != nil {
		return "", err
	}
	return text, nil
}
