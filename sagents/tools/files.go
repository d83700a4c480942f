package tools

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sage-go/sage/sagents/sandbox"
)

type readArgs struct {
	Path        string `json:"path" jsonschema:"minLength=1" jsonschema_description:"File path (sandbox path; relative to the workspace)."`
	StartLine   int    `json:"start_line,omitempty" jsonschema:"minimum=1" jsonschema_description:"First line to return, 1-based (default 1)."`
	EndLine     int    `json:"end_line,omitempty" jsonschema:"minimum=1" jsonschema_description:"Last line to return, inclusive (default: the last line)."`
	LineNumbers bool   `json:"line_numbers,omitempty" jsonschema_description:"Prefix each line with its number."`
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"minLength=1" jsonschema_description:"File path (sandbox path; relative to the workspace). Missing directories are created."`
	Content string `json:"content" jsonschema_description:"The text to write."`
	Mode    string `json:"mode,omitempty" jsonschema:"enum=overwrite,enum=append" jsonschema_description:"overwrite (default) replaces the file; append adds to its end."`
}

// FileTools returns file_read, file_write and file_update.
func FileTools() []Tool {
	return []Tool{
		NewFunc("file_read", "Read a text file, or a range of its lines.", fileRead),
		NewFunc("file_write", "Write a text file, replacing it or appending to it.", fileWrite),
		NewFunc("file_update",
			"Edit a text file with a list of operations applied all-or-nothing: "+
				"replace (search text, taken literally first and as a regular expression only if the literal text is absent; it must match exactly once) "+
				"and lines (replace lines start_line..end_line of the file as read, with content; line edits are applied bottom-up so their numbers all refer to the original file, before the replace operations).",
			fileUpdate),
	}
}

// binarySniff is how much of a file is checked for NUL bytes.
const binarySniff = 8 << 10

func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0
}

// readText reads a text file: a binary file is an error, invalid UTF-8 is
// replaced with U+FFFD and reported by the second result.
func readText(ctx context.Context, h Sandbox, p string) (string, bool, error) {
	b, err := h.ReadFile(ctx, p)
	if err != nil {
		return "", false, fileError(ctx, h, p, err)
	}
	if isBinary(b) {
		return "", false, &Error{Code: CodeBinaryFile, Message: fmt.Sprintf("%s is a binary file (%d bytes)", p, len(b)),
			Hint: "inspect it with a command, e.g. execute_shell_command with `file` or `xxd | head`"}
	}
	if utf8.Valid(b) {
		return string(b), false, nil
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), true, nil
}

// fileError explains a failed read: a directory gets its own code.
func fileError(ctx context.Context, h Sandbox, p string, err error) error {
	if isNotExist(err) || isPermission(err) {
		return err
	}
	if _, lerr := h.ListDirectory(ctx, p); lerr == nil {
		return &Error{Code: CodeIsDirectory, Message: p + " is a directory", Hint: "use list_dir to see its entries", Err: err}
	}
	return err
}

func fileRead(ctx context.Context, h Sandbox, a readArgs) (Result, error) {
	text, lossy, err := readText(ctx, h, a.Path)
	if err != nil {
		return Result{}, err
	}
	lines := splitLines(text)
	start, end := max(a.StartLine, 1), a.EndLine
	if end == 0 || end > len(lines) {
		end = len(lines)
	}
	if len(lines) > 0 && start > len(lines) {
		return Result{}, invalidArgs("start_line %d is past the end of %s (%d lines)", start, a.Path, len(lines))
	}
	if start > end && len(lines) > 0 {
		return Result{}, invalidArgs("start_line %d is after end_line %d", start, end)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: lines %d-%d of %d", a.Path, min(start, end), end, len(lines))
	if lossy {
		b.WriteString(" (not valid UTF-8: invalid bytes shown as \uFFFD)")
	}
	b.WriteString("\n")
	for i := start; i <= end; i++ {
		if a.LineNumbers {
			fmt.Fprintf(&b, "%6d\t", i)
		}
		b.WriteString(lines[i-1])
		if !strings.HasSuffix(lines[i-1], "\n") {
			b.WriteString("\n[no newline at end of file]\n")
		}
	}
	return Result{Text: b.String()}, nil
}

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func fileWrite(ctx context.Context, h Sandbox, a writeArgs) (Result, error) {
	opts := sandbox.WriteOptions{Append: a.Mode == "append"}
	if err := h.WriteFile(ctx, a.Path, []byte(a.Content), opts); err != nil {
		return Result{}, err
	}
	verb := "wrote"
	if opts.Append {
		verb = "appended"
	}
	return Result{Text: fmt.Sprintf("%s %d bytes (%d lines) to %s", verb, len(a.Content), len(splitLines(a.Content)), a.Path)}, nil
}
