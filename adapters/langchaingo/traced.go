package langchaingosage

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/sage-go/sage/sagents/observability"
)

// Traced returns c as a chain whose every call is an agent run of obs
// named name (in a chain of its own when the context carries no run, as
// observability.Manager.StartAgent does). Call it with chains.Run or
// chains.Call as c itself: it calls c through chains.Call, so c's memory
// and callbacks work as before.
func Traced(obs *observability.Manager, name string, c chains.Chain) chains.Chain {
	return &traced{obs: obs, name: name, c: c}
}

type traced struct {
	obs  *observability.Manager
	name string
	c    chains.Chain
}

func (t *traced) Call(ctx context.Context, inputs map[string]any, options ...chains.ChainCallOption) (map[string]any, error) {
	ctx, end := t.obs.StartAgent(ctx, observability.AgentInfo{Name: t.name, Inputs: messages("user", inputs)})
	out, err := chains.Call(ctx, t.c, inputs, options...)
	end(messages("assistant", out), err)
	return out, err
}

// GetMemory is empty: c's own memory is used by the chains.Call inside.
func (t *traced) GetMemory() schema.Memory { return memory.NewSimple() }

func (t *traced) GetInputKeys() []string { return t.c.GetInputKeys() }

func (t *traced) GetOutputKeys() []string { return t.c.GetOutputKeys() }

// messages reports a chain's values as one message each, string values
// as they are.
func messages(role string, values map[string]any) []observability.Message {
	var out []observability.Message
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v := values[k]
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		out = append(out, observability.Message{Role: role, Name: k, Content: s})
	}
	return out
}
