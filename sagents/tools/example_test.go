package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/tools"
)

// The built-in tools over a sandbox, with a command policy from its YAML
// form: a call the policy denies comes back as the error the model reads.
func ExampleManager() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sage-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	policy, err := tools.ParsePolicy([]byte(`
rules:
  - name: no-network-tools
    match: '^(curl|wget) '
    decision: deny
    reason: this task needs no network
`), sb.WorkspacePath())
	if err != nil {
		log.Fatal(err)
	}
	m := tools.NewManager(sb, tools.Options{}) // Observer: a Manager, to trace every call
	if err := m.RegisterBuiltins(tools.BuiltinOptions{Shell: tools.ShellOptions{Policy: policy}}); err != nil {
		log.Fatal(err)
	}

	out, err := m.Run(ctx, "file_write", json.RawMessage(`{"path":"notes.txt","content":"one\ntwo\n"}`))
	fmt.Println(out, err)
	out, err = m.Run(ctx, "execute_shell_command", json.RawMessage(`{"command":"wc -l < notes.txt"}`))
	status, output, _ := strings.Cut(out, "\n")
	_, output, _ = strings.Cut(output, "together):\n") // after the task id, exit code and size
	fmt.Print(status, "; ", output, err, "\n")
	out, _ = m.Run(ctx, "execute_shell_command", json.RawMessage(`{"command":"curl https://example.com"}`))
	fmt.Println(out)
	// Output:
	// wrote 8 bytes (2 lines) to notes.txt <nil>
	// status: completed; 2
	// <nil>
	// {"success":false,"error_code":"policy_denied","message":"command denied by policy rule no-network-tools: this task needs no network","hint":"do not retry this command; find another way or explain to the user why it is needed"}
}

// A tool of your own: its arguments are a Go struct, whose fields give
// the JSON Schema the model sees and the Manager validates against.
func ExampleNewFunc() {
	type args struct {
		Name string `json:"name" jsonschema:"minLength=1" jsonschema_description:"Who to greet."`
	}
	greet := tools.NewFunc("greet", "Greet someone by name.", func(ctx context.Context, h tools.Sandbox, a args) (tools.Result, error) {
		return tools.Result{Text: "hello, " + a.Name}, nil
	})
	fmt.Println(string(greet.Schema()))

	m := tools.NewManager(nil, tools.Options{})
	if err := m.Register(greet); err != nil {
		log.Fatal(err)
	}
	out, _ := m.Run(context.Background(), "greet", json.RawMessage(`{"name":"Ada"}`))
	fmt.Println(out)
	out, _ = m.Run(context.Background(), "greet", json.RawMessage(`{"name":""}`))
	fmt.Println(out)
	// Output:
	// {"properties":{"name":{"type":"string","minLength":1,"description":"Who to greet."}},"additionalProperties":false,"type":"object","required":["name"]}
	// hello, Ada
	// {"success":false,"error_code":"invalid_arguments","message":"at /name: minLength: got 0, want 1","hint":"fix the arguments to match the tool's parameters schema and call it again"}
}
