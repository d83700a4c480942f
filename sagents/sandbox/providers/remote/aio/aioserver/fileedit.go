package aioserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// readText reads a UTF-8 text file under the read limit; a failure is a
// FileOperationError answer (already written) for op.
func (s *Server) readText(w http.ResponseWriter, r *http.Request, op, p string) (string, bool) {
	data, err := s.readCapped(r.Context(), p, s.opts.MaxReadBytes)
	var tl *errTooLarge
	switch {
	case errors.As(err, &tl):
		err = badArg(tl.Error() + " (the server's read limit)")
	case err == nil && !utf8.Valid(data):
		err = badArg("file is not UTF-8 text")
	}
	if err != nil {
		s.failFile(w, op, p, err)
		return "", false
	}
	return string(data), true
}

type fileReplaceRequest struct {
	File   string `json:"file"`
	OldStr string `json:"old_str"`
	NewStr string `json:"new_str"`
	Sudo   *bool  `json:"sudo"`
}

type fileReplaceResult struct {
	File          string `json:"file"`
	ReplacedCount int    `json:"replaced_count"`
}

// fileReplace is POST /v1/file/replace: every occurrence of old_str
// becomes new_str. sudo is ignored: sandboxd has one user.
func (s *Server) fileReplace(w http.ResponseWriter, r *http.Request) {
	var req fileReplaceRequest
	if !s.decode(w, r, &req, "file", "old_str", "new_str") {
		return
	}
	if req.OldStr == "" {
		s.failFile(w, "replace", req.File, badArg("old_str is empty: give the text to replace"))
		return
	}
	text, okRead := s.readText(w, r, "replace", req.File)
	if !okRead {
		return
	}
	n := strings.Count(text, req.OldStr)
	if n > 0 {
		if err := s.h.WriteFile(r.Context(), req.File, []byte(strings.ReplaceAll(text, req.OldStr, req.NewStr)), driver.WriteOptions{}); err != nil {
			s.failFile(w, "replace", req.File, err)
			return
		}
	}
	ok(w, fileReplaceResult{File: req.File, ReplacedCount: n})
}

type fileSearchRequest struct {
	File  string `json:"file"`
	Regex string `json:"regex"`
	Sudo  *bool  `json:"sudo"`
}

type fileSearchResult struct {
	File        string   `json:"file"`
	Matches     []string `json:"matches"`
	LineNumbers []int    `json:"line_numbers"`
}

// maxSearchMatches bounds the lines /v1/file/search returns.
const maxSearchMatches = 10000

// fileSearch is POST /v1/file/search: the lines of one file matching a
// regular expression (RE2), with their 1-based numbers.
func (s *Server) fileSearch(w http.ResponseWriter, r *http.Request) {
	var req fileSearchRequest
	if !s.decode(w, r, &req, "file", "regex") {
		return
	}
	re, err := regexp.Compile(req.Regex)
	if err != nil {
		s.fail(w, invalid([]any{"body", "regex"}, "value_error", err.Error()))
		return
	}
	text, okRead := s.readText(w, r, "search", req.File)
	if !okRead {
		return
	}
	res := fileSearchResult{File: req.File, Matches: []string{}, LineNumbers: []int{}}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if len(res.Matches) == maxSearchMatches {
			break
		}
		if re.MatchString(line) {
			res.Matches = append(res.Matches, line)
			res.LineNumbers = append(res.LineNumbers, i+1)
		}
	}
	ok(w, res)
}

// editHistory keeps previous contents for str_replace_editor's
// undo_edit, bounded in files, versions per file and bytes.
type editHistory struct {
	mu    sync.Mutex
	m     map[string][]string
	bytes int
}

const (
	maxUndoFiles    = 256
	maxUndoVersions = 10
	maxUndoBytes    = 64 << 20
)

func (h *editHistory) push(p, old string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string][]string{}
	}
	if _, ok := h.m[p]; !ok && len(h.m) >= maxUndoFiles {
		return
	}
	if h.bytes+len(old) > maxUndoBytes {
		return
	}
	v := append(h.m[p], old)
	if len(v) > maxUndoVersions {
		h.bytes -= len(v[0])
		v = v[1:]
	}
	h.m[p] = v
	h.bytes += len(old)
}

func (h *editHistory) pop(p string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.m[p]
	if len(v) == 0 {
		return "", false
	}
	old := v[len(v)-1]
	if len(v) == 1 {
		delete(h.m, p)
	} else {
		h.m[p] = v[:len(v)-1]
	}
	h.bytes -= len(old)
	return old, true
}

// numbered renders lines as `cat -n` does, numbering from first.
func numbered(lines []string, first int) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, l)
	}
	return b.String()
}

// exists reports whether p exists in the sandbox.
func (s *Server) exists(r *http.Request, p string) (bool, error) {
	ok, err := s.h.FileExists(r.Context(), p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return ok, err
}
