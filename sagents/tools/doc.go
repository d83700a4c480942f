// Package tools is the layer the model calls: tools that only ever talk to
// a [Sandbox], so one tool set works in every sandbox mode.
//
// Its API: the [Tool] interface, with [NewFunc] and [SchemaFor] for tools
// of one's own, which return a [Result] or an [*Error] with one of the
// Code* codes; the [Manager] ([NewManager], [Options], [Spec], [Call]) with
// its [Policy] ([LoadPolicy], [ParsePolicy], [Rule], [Verdict]) and
// [Approver]s; the built-in tool sets ([Builtins] and [ShellTools],
// [FileTools], [SearchTools], [PythonTool], [CheckpointTools], [UndoTool]);
// [WithProgress]; skills ([LoadSkills], [SkillManager]); and [Sandbox], what
// the tools need of a sandbox. The built-in tools' limits and the Manager's
// result bounding are internal.
//
// A [Tool] has a name, a description, a JSON Schema of its arguments and a
// Run method. [NewFunc] builds one from a typed function whose arguments
// struct gives the schema (github.com/invopop/jsonschema). A [Manager]
// registers tools, lists them as OpenAI tool definitions, validates each
// call's arguments against the schema (github.com/santhosh-tekuri/jsonschema)
// before running it, reports the call to an observability Manager, and
// bounds every result (default about 12k tokens, estimated at 4 bytes a
// token): the head and the tail are kept, and a marker says what was cut and
// where the full text was saved in the sandbox (.sage/tool-output/).
//
// A failed call returns a structured error the model can read:
//
//	{"success":false,"error_code":"not_found","message":"...","hint":"..."}
//
// The built-in tools ([Builtins]):
//
//   - execute_shell_command, await_shell, kill_shell: commands run as
//     background tasks; a result comes back when the command ends within
//     block_until_ms, otherwise a task id, the output tail and a suggested
//     next wait. Each command is first judged by a [Policy] (allow, ask an
//     [Approver], or deny). While a call waits, output that arrives goes to
//     the [ProgressFunc] of its context ([WithProgress]); an
//     execute_shell_command whose context is cancelled kills its command.
//   - file_read, file_write, file_update: text files; binary files and
//     invalid UTF-8 are reported, not pasted.
//   - grep, glob, list_dir: implemented in Go over the sandbox's file API; no
//     path is ever pasted into a shell command.
//   - execute_python.
//
// A [SkillManager] loads skills (folders with a SKILL.md that starts with
// YAML front matter), copies them into the sandbox and renders their
// one-line descriptions for the system prompt.
package tools
