package aioserver

import (
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// strReplaceEditorRequest is POST /v1/file/str_replace_editor, the text
// editor tool of Anthropic's models (view, create, str_replace, insert,
// undo_edit). The PDF, Excel and PowerPoint fields of the upstream API
// are accepted and ignored: sandboxd edits text files.
type strReplaceEditorRequest struct {
	Command     string  `json:"command"`
	Path        string  `json:"path"`
	FileText    *string `json:"file_text"`
	OldStr      *string `json:"old_str"`
	NewStr      *string `json:"new_str"`
	InsertLine  *int    `json:"insert_line"`
	ViewRange   []int   `json:"view_range"`
	ReplaceMode *string `json:"replace_mode"`
}

type strReplaceEditorResult struct {
	Output     string  `json:"output"`
	Error      *string `json:"error"`
	Path       string  `json:"path"`
	PrevExist  bool    `json:"prev_exist"`
	OldContent *string `json:"old_content"`
	NewContent *string `json:"new_content"`
}

const editorOp = "str_replace_editor"

func (s *Server) strReplaceEditor(w http.ResponseWriter, r *http.Request) {
	var req strReplaceEditorRequest
	if !s.decode(w, r, &req, "command", "path") {
		return
	}
	switch req.Command {
	case "view", "create", "str_replace", "insert", "undo_edit":
	default:
		s.fail(w, invalid([]any{"body", "command"}, "enum", "Input should be 'view', 'create', 'str_replace', 'insert' or 'undo_edit'"))
		return
	}
	existed, err := s.exists(r, req.Path)
	if err != nil {
		s.failFile(w, editorOp, req.Path, err)
		return
	}
	res := strReplaceEditorResult{Path: req.Path, PrevExist: existed}
	if req.Command == "create" {
		s.editorCreate(w, r, req, res)
		return
	}
	if !existed {
		s.failFile(w, editorOp, req.Path, fmt.Errorf("the path %s does not exist: %w", req.Path, fs.ErrNotExist))
		return
	}
	if req.Command == "view" {
		s.editorView(w, r, req, res)
		return
	}
	old, okRead := s.readText(w, r, editorOp, req.Path)
	if !okRead {
		return
	}
	var text, out string
	switch req.Command {
	case "str_replace":
		text, out, err = strReplace(old, req)
	case "insert":
		text, out, err = insertAt(old, req)
	case "undo_edit":
		prev, found := s.history.pop(req.Path)
		if !found {
			err = badArg("no edit history found for " + req.Path)
		}
		text, out = prev, "Last edit to "+req.Path+" undone successfully."
	}
	if err != nil {
		s.failFile(w, editorOp, req.Path, err)
		return
	}
	if err := s.h.WriteFile(r.Context(), req.Path, []byte(text), driver.WriteOptions{}); err != nil {
		s.failFile(w, editorOp, req.Path, err)
		return
	}
	if req.Command != "undo_edit" {
		s.history.push(req.Path, old)
	}
	res.Output, res.OldContent, res.NewContent = out, &old, &text
	ok(w, res)
}

func (s *Server) editorCreate(w http.ResponseWriter, r *http.Request, req strReplaceEditorRequest, res strReplaceEditorResult) {
	if req.FileText == nil {
		s.fail(w, invalid([]any{"body", "file_text"}, "missing", "Field required for command create"))
		return
	}
	if res.PrevExist {
		s.failFile(w, editorOp, req.Path, badArg("file already exists at "+req.Path+": command create does not overwrite files; use str_replace"))
		return
	}
	if err := s.h.WriteFile(r.Context(), req.Path, []byte(*req.FileText), driver.WriteOptions{}); err != nil {
		s.failFile(w, editorOp, req.Path, err)
		return
	}
	res.Output, res.NewContent = "File created successfully at: "+req.Path, req.FileText
	ok(w, res)
}

func (s *Server) editorView(w http.ResponseWriter, r *http.Request, req strReplaceEditorRequest, res strReplaceEditorResult) {
	entries, _, err := s.h.ListDirectoryLimit(r.Context(), req.Path, 1)
	if err == nil && entries != nil {
		// A directory: its files and directories up to 2 levels deep,
		// hidden ones left out.
		var b strings.Builder
		fmt.Fprintf(&b, "Here are the files and directories up to 2 levels deep in %s, excluding hidden items:\n%s\n", req.Path, req.Path)
		if _, err := s.walk(r.Context(), req.Path, 2, func(fi driver.FileInfo) error {
			if strings.HasPrefix(fi.Name, ".") {
				return errSkip
			}
			b.WriteString(fi.Path + "\n")
			return nil
		}); err != nil {
			s.failFile(w, editorOp, req.Path, err)
			return
		}
		res.Output = b.String()
		ok(w, res)
		return
	}
	text, okRead := s.readText(w, r, editorOp, req.Path)
	if !okRead {
		return
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	first, last := 1, len(lines)
	if len(req.ViewRange) > 0 {
		if len(req.ViewRange) != 2 {
			s.failFile(w, editorOp, req.Path, badArg("view_range must be [start, end]"))
			return
		}
		first, last = req.ViewRange[0], req.ViewRange[1]
		if last == -1 {
			last = len(lines)
		}
		if first < 1 || first > len(lines) || last < first || last > len(lines) {
			s.failFile(w, editorOp, req.Path, badArg(fmt.Sprintf("view_range %v: the file has %d lines; want 1 <= start <= end <= %d (end -1: to the end)", req.ViewRange, len(lines), len(lines))))
			return
		}
	}
	res.Output = "Here's the result of running `cat -n` on " + req.Path + ":\n" + numbered(lines[first-1:last], first)
	ok(w, res)
}

// strReplace replaces old_str, which must occur exactly once unless
// replace_mode says ALL, FIRST or LAST.
func strReplace(text string, req strReplaceEditorRequest) (string, string, error) {
	if req.OldStr == nil || *req.OldStr == "" {
		return "", "", badArg("old_str is required for command str_replace")
	}
	old, repl := *req.OldStr, ""
	if req.NewStr != nil {
		repl = *req.NewStr
	}
	n := strings.Count(text, old)
	if n == 0 {
		return "", "", badArg(fmt.Sprintf("no replacement was performed: old_str %q did not appear verbatim in %s", old, req.Path))
	}
	mode := ""
	if req.ReplaceMode != nil {
		mode = *req.ReplaceMode
	}
	var out string
	switch mode {
	case "":
		if n > 1 {
			return "", "", badArg(fmt.Sprintf("no replacement was performed: old_str %q occurs %d times in %s; make it unique or set replace_mode", old, n, req.Path))
		}
		out = strings.Replace(text, old, repl, 1)
	case "ALL":
		out = strings.ReplaceAll(text, old, repl)
	case "FIRST":
		out = strings.Replace(text, old, repl, 1)
	case "LAST":
		i := strings.LastIndex(text, old)
		out = text[:i] + repl + text[i+len(old):]
	default:
		return "", "", badArg("replace_mode " + mode + ": want ALL, FIRST or LAST")
	}
	return out, "The file " + req.Path + " has been edited.", nil
}

// insertAt inserts new_str after line insert_line (0: at the top).
func insertAt(text string, req strReplaceEditorRequest) (string, string, error) {
	if req.NewStr == nil || req.InsertLine == nil {
		return "", "", badArg("new_str and insert_line are required for command insert")
	}
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	at := *req.InsertLine
	if at < 0 || at > len(lines) {
		return "", "", badArg(fmt.Sprintf("insert_line %d: want 0 to %d, the file's line count", at, len(lines)))
	}
	ins := *req.NewStr
	if !strings.HasSuffix(ins, "\n") {
		ins += "\n"
	}
	if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += "\n"
	}
	out := strings.Join(lines[:at], "") + ins + strings.Join(lines[at:], "")
	return out, "The file " + req.Path + " has been edited.", nil
}
