package einosage

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/sage-go/sage/sagents/tools"
)

// Tool is one tool of a tools.Manager as an Eino tool.InvokableTool.
type Tool struct {
	m    *tools.Manager
	spec tools.Spec
	info *schema.ToolInfo
}

var _ tool.InvokableTool = (*Tool)(nil)

// Tools returns every tool registered with m (sorted by name) as Eino
// tools, ready for compose.ToolsNodeConfig.Tools. Tools registered with m
// later are not included.
func Tools(m *tools.Manager) ([]tool.BaseTool, error) {
	specs := m.Specs()
	out := make([]tool.BaseTool, 0, len(specs))
	for _, s := range specs {
		t, err := newTool(m, s)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func newTool(m *tools.Manager, s tools.Spec) (*Tool, error) {
	sch := &jsonschema.Schema{}
	if err := json.Unmarshal(s.Parameters, sch); err != nil {
		return nil, fmt.Errorf("einosage: tool %s: schema: %w", s.Name, err)
	}
	return &Tool{m: m, spec: s, info: &schema.ToolInfo{Name: s.Name, Desc: s.Description,
		ParamsOneOf: schema.NewParamsOneOfByJSONSchema(sch)}}, nil
}

// Info describes the tool to the model: its name, description and the
// JSON Schema of its arguments.
func (t *Tool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun runs the call through the Manager, with the call id Eino's
// tools node carries in ctx. A failed call's result is the JSON of its
// tools.Error (for the model to read) and err is nil, unless ctx is done.
func (t *Tool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...tool.Option) (string, error) {
	text, err := t.m.Do(ctx, tools.Call{ID: compose.GetToolCallID(ctx), Name: t.spec.Name, Arguments: json.RawMessage(argumentsInJSON)})
	if err != nil && ctx.Err() != nil {
		return "", err
	}
	return text, nil
}
