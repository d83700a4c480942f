package sage_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability/otelsage"
	"github.com/sage-go/sage/sagents/sage"
)

// OpenTelemetry: otelsage.Setup registers its handler with the Manager
// New made, and every part reports through it. A program exporting to
// Jaeger or any OTLP collector gives Setup only a ServiceName (and the
// OTEL_* environment, or Endpoint); this example brings its own
// TracerProvider over an in-memory recorder to print the span tree.
func Example_openTelemetry() {
	ctx := context.Background()
	model, err := replay.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	rt, err := sage.New(ctx, sage.Options{Model: llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}}})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	spans := tracetest.NewSpanRecorder()
	shutdown, err := otelsage.Setup(ctx, otelsage.SetupOptions{
		ServiceName:    "my-agent",
		Manager:        rt.Observer,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		NoGlobal:       true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer shutdown(ctx)

	if _, err := rt.Run(ctx, "Write fib.py, run it and report what it prints."); err != nil {
		log.Fatal(err)
	}
	printTree(spans.Ended())
	// Output:
	// invoke_agent sage
	//   chat sage-replay (4 spans)
	//   execute_tool execute_shell_command
	//     sandbox.start_background
	//   execute_tool file_read
	//     sandbox.read_file
	//   execute_tool file_write
	//     sandbox.write_file
	//   execute_tool list_dir
	//     sandbox.file_tree
}

// printTree prints each span's distinct children by name (the polls of a
// running command vary in number, so sandbox spans under a tool are
// shown only once, and only the first of them).
func printTree(spans []sdktrace.ReadOnlySpan) {
	kids := map[string][]sdktrace.ReadOnlySpan{}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().IsValid() {
			kids[s.Parent().SpanID().String()] = append(kids[s.Parent().SpanID().String()], s)
		} else if strings.HasPrefix(s.Name(), "invoke_agent") {
			roots = append(roots, s)
		}
	}
	var walk func(s sdktrace.ReadOnlySpan, depth int, n int)
	walk = func(s sdktrace.ReadOnlySpan, depth int, n int) {
		line := strings.Repeat("  ", depth) + s.Name()
		if n > 1 {
			line += fmt.Sprintf(" (%d spans)", n)
		}
		fmt.Println(line)
		cs := kids[s.SpanContext().SpanID().String()]
		slices.SortFunc(cs, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		if strings.HasPrefix(s.Name(), "execute_tool") && len(cs) > 0 {
			cs = cs[:1]
		}
		byName := map[string][]sdktrace.ReadOnlySpan{}
		var names []string
		for _, c := range cs {
			if byName[c.Name()] == nil {
				names = append(names, c.Name())
			}
			byName[c.Name()] = append(byName[c.Name()], c)
		}
		slices.Sort(names)
		for _, name := range names {
			walk(byName[name][0], depth+1, len(byName[name]))
		}
	}
	for _, r := range roots {
		walk(r, 0, 1)
	}
}
