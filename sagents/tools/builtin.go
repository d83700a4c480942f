package tools

// BuiltinOptions configure [Builtins].
type BuiltinOptions struct {
	Shell ShellOptions
}

// Builtins returns every built-in tool: the shell tools, the file tools,
// the search tools and execute_python.
func Builtins(o BuiltinOptions) []Tool {
	ts := ShellTools(o.Shell)
	ts = append(ts, FileTools()...)
	ts = append(ts, SearchTools()...)
	return append(ts, PythonTool())
}

// RegisterBuiltins registers every built-in tool ([Builtins]) with m.
func (m *Manager) RegisterBuiltins(o BuiltinOptions) error {
	return m.Register(Builtins(o)...)
}
