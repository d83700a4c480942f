package genkitsage

import (
	"context"
	"encoding/json"

	"github.com/firebase/genkit/go/core"

	"github.com/sage-go/sage/sagents/observability"
)

// Traced returns fn as a function whose every run is an agent run of obs
// named name (in a chain of its own when the context carries no run, as
// observability.Manager.StartAgent does): give it to genkit.DefineFlow.
func Traced[In, Out any](obs *observability.Manager, name string, fn core.Func[In, Out]) core.Func[In, Out] {
	return func(ctx context.Context, in In) (out Out, err error) {
		ctx, end := obs.StartAgent(ctx, observability.AgentInfo{Name: name, Inputs: message("user", in)})
		defer func() { end(message("assistant", out), err) }()
		return fn(ctx, in)
	}
}

// message reports a flow's input or output: a string as it is, anything
// else as its JSON.
func message(role string, v any) []observability.Message {
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	return []observability.Message{{Role: role, Content: s}}
}
