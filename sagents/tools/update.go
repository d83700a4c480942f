package tools

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

type updateArgs struct {
	Path       string     `json:"path" jsonschema:"minLength=1" jsonschema_description:"File path (sandbox path; relative to the workspace)."`
	Operations []updateOp `json:"operations" jsonschema:"minItems=1" jsonschema_description:"The edits, applied all-or-nothing."`
}

type updateOp struct {
	Type      string `json:"type" jsonschema:"enum=replace,enum=lines" jsonschema_description:"replace: search/replace; lines: replace a line range."`
	Search    string `json:"search,omitempty" jsonschema_description:"replace: the text to find (literal; a regular expression only if the literal text is absent). It must match exactly once."`
	Replace   string `json:"replace,omitempty" jsonschema_description:"replace: the new text (with a regular expression, $1 expands a group)."`
	StartLine int    `json:"start_line,omitempty" jsonschema:"minimum=1" jsonschema_description:"lines: first line to replace, 1-based."`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"minimum=0" jsonschema_description:"lines: last line to replace, inclusive; start_line-1 inserts before start_line."`
	Content   string `json:"content,omitempty" jsonschema_description:"lines: the new lines (empty deletes the range)."`
}

// maxContexts is how many matches an ambiguous search reports.
const maxContexts = 3

func fileUpdate(ctx context.Context, h Sandbox, a updateArgs) (Result, error) {
	text, lossy, err := readText(ctx, h, a.Path)
	if err != nil {
		return Result{}, err
	}
	if lossy {
		return Result{}, &Error{Code: CodeBinaryFile, Message: a.Path + " is not valid UTF-8; editing it would corrupt it",
			Hint: "rewrite it with file_write or edit it with a command"}
	}
	var lineOps, replaceOps []updateOp
	for i, op := range a.Operations {
		switch op.Type {
		case "lines":
			if op.StartLine < 1 || op.EndLine < op.StartLine-1 {
				return Result{}, invalidArgs("operation %d: lines needs start_line >= 1 and end_line >= start_line-1", i)
			}
			lineOps = append(lineOps, op)
		case "replace":
			if op.Search == "" {
				return Result{}, invalidArgs("operation %d: replace needs a non-empty search", i)
			}
			replaceOps = append(replaceOps, op)
		}
	}
	if text, err = applyLines(text, lineOps); err != nil {
		return Result{}, err
	}
	var notes []string
	for _, op := range replaceOps {
		var how string
		if text, how, err = applyReplace(text, op); err != nil {
			return Result{}, err
		}
		notes = append(notes, how)
	}
	if err := h.WriteFile(ctx, a.Path, []byte(text), sandbox.WriteOptions{}); err != nil {
		return Result{}, err
	}
	msg := fmt.Sprintf("updated %s: %d line edit(s), %d replacement(s)", a.Path, len(lineOps), len(replaceOps))
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, ", ") + ")"
	}
	return Result{Text: msg + fmt.Sprintf("; the file now has %d lines", len(splitLines(text)))}, nil
}

// applyLines applies line-range edits bottom-up, so every range refers to
// the lines as read. Overlapping ranges are an error.
func applyLines(text string, ops []updateOp) (string, error) {
	if len(ops) == 0 {
		return text, nil
	}
	lines := splitLines(text)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].StartLine > ops[j].StartLine })
	for i, op := range ops {
		if op.StartLine > len(lines)+1 || op.EndLine > len(lines) {
			return "", invalidArgs("lines %d-%d: the file has %d lines", op.StartLine, op.EndLine, len(lines))
		}
		if i > 0 && op.EndLine >= ops[i-1].StartLine {
			return "", invalidArgs("line ranges %d-%d and %d-%d overlap", op.StartLine, op.EndLine, ops[i-1].StartLine, ops[i-1].EndLine)
		}
		repl := splitLines(op.Content)
		keepNL := op.EndLine < len(lines) || (op.EndLine >= op.StartLine && strings.HasSuffix(lines[op.EndLine-1], "\n"))
		if n := len(repl); n > 0 && !strings.HasSuffix(repl[n-1], "\n") && keepNL {
			repl[n-1] += "\n"
		}
		if op.StartLine-1 > 0 && op.StartLine-1 == len(lines) && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			lines[len(lines)-1] += "\n" // appending after a last line without newline
		}
		lines = append(lines[:op.StartLine-1], append(repl, lines[op.EndLine:]...)...)
	}
	return strings.Join(lines, ""), nil
}

// applyReplace replaces the one match of op.Search: literal text first,
// then, if absent, the search as a regular expression.
func applyReplace(text string, op updateOp) (string, string, error) {
	if n := strings.Count(text, op.Search); n == 1 {
		return strings.Replace(text, op.Search, op.Replace, 1), "literal", nil
	} else if n > 1 {
		idx := literalIndexes(text, op.Search)
		return "", "", ambiguous(text, op.Search, idx)
	}
	re, err := regexp.Compile("(?m)" + op.Search)
	if err != nil {
		return "", "", &Error{Code: CodeNoMatch, Message: fmt.Sprintf("search text not found: %q (and it is not a valid regular expression: %v)", clip(op.Search), err),
			Hint: "read the file with file_read and copy the exact text, whitespace included"}
	}
	locs := re.FindAllStringSubmatchIndex(text, maxContexts+1)
	switch {
	case len(locs) == 0:
		return "", "", &Error{Code: CodeNoMatch, Message: fmt.Sprintf("search text not found, literally or as a regular expression: %q", clip(op.Search)),
			Hint: "read the file with file_read and copy the exact text, whitespace included"}
	case len(locs) > 1:
		idx := make([]int, len(locs))
		for i, l := range locs {
			idx[i] = l[0]
		}
		return "", "", ambiguous(text, op.Search, idx)
	}
	l := locs[0]
	var out []byte
	out = re.ExpandString(out, op.Replace, text, l)
	return text[:l[0]] + string(out) + text[l[1]:], "regex", nil
}

func literalIndexes(text, s string) []int {
	var idx []int
	for off := 0; len(idx) <= maxContexts; {
		i := strings.Index(text[off:], s)
		if i < 0 {
			break
		}
		idx = append(idx, off+i)
		off += i + max(len(s), 1)
	}
	return idx
}

// ambiguous reports up to maxContexts matches with their line numbers.
func ambiguous(text, search string, idx []int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "search text %q matches more than once; first matches:", clip(search))
	for i, at := range idx {
		if i == maxContexts {
			break
		}
		line := strings.Count(text[:at], "\n") + 1
		start := strings.LastIndexByte(text[:at], '\n') + 1
		end := strings.IndexByte(text[at:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += at
		}
		fmt.Fprintf(&b, "\n  line %d: %s", line, clip(text[start:end]))
	}
	return &Error{Code: CodeAmbiguousMatch, Message: b.String(),
		Hint: "add surrounding lines to search so that it matches exactly once, or use a lines operation"}
}

func clip(s string) string {
	if len(s) <= 120 {
		return s
	}
	i := 120
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}
