package genkitsage

import (
	"encoding/json"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/sage-go/sage/sagents/tools"
)

// DefineTools defines every tool registered with m (sorted by name) as a
// Genkit tool of g and returns them, ready for ai.WithTools. Tools
// registered with m later are not included; defining a name g already
// has panics, as genkit.DefineTool does.
func DefineTools(g *genkit.Genkit, m *tools.Manager) []ai.ToolRef {
	specs := m.Specs()
	out := make([]ai.ToolRef, 0, len(specs))
	for _, s := range specs {
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			panic(fmt.Sprintf("genkitsage: tool %s: schema: %v", s.Name, err)) // tools.Manager compiled it
		}
		out = append(out, genkit.DefineTool(g, s.Name, s.Description, run(m, s.Name), ai.WithInputSchema(schema)))
	}
	return out
}

// run calls the tool through the Manager with the input Genkit decoded.
// A failed call's output is the JSON of its tools.Error (for the model
// to read) and err is nil, unless ctx is done.
func run(m *tools.Manager, name string) ai.ToolFunc[any, string] {
	return func(ctx *ai.ToolContext, input any) (string, error) {
		args, err := json.Marshal(input)
		if err != nil {
			return "", fmt.Errorf("genkitsage: tool %s: input: %w", name, err)
		}
		text, err := m.Do(ctx, tools.Call{Name: name, Arguments: args})
		if err != nil && ctx.Err() != nil {
			return "", err
		}
		return text, nil
	}
}
