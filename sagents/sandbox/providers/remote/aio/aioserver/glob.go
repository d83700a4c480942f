package aioserver

import (
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// maxGlobDepth bounds how deep find and glob walk.
const maxGlobDepth = 64

// globMatcher matches a path relative to the searched directory against
// a pattern with Python's recursive-glob meaning: "**" as a whole path
// element matches zero or more directories, "*" and "?" never cross "/".
// A pattern without "/" also matches the base name at any depth (what
// /v1/file/find has always done: "*.txt" finds a/b.txt).
type globMatcher struct {
	pattern  string
	nameOnly bool
}

func newGlobMatcher(pattern string) (globMatcher, error) {
	pattern = strings.TrimPrefix(pattern, "./")
	if !doublestar.ValidatePattern(pattern) {
		return globMatcher{}, badArg("bad glob pattern " + pattern)
	}
	return globMatcher{pattern: pattern, nameOnly: !strings.Contains(pattern, "/")}, nil
}

func (g globMatcher) match(rel, name string) bool {
	if ok, _ := doublestar.Match(g.pattern, rel); ok {
		return true
	}
	if g.nameOnly {
		ok, _ := doublestar.Match(g.pattern, name)
		return ok
	}
	return false
}

// relTo is p relative to dir (both as the Handle reports them).
func relTo(dir, p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, strings.TrimSuffix(dir, "/")), "/")
}

func (s *Server) fileFind(w http.ResponseWriter, r *http.Request) {
	var req aio.FileFindRequest
	if !s.decode(w, r, &req, "path", "glob") {
		return
	}
	g, err := newGlobMatcher(req.Glob)
	if err != nil {
		s.fail(w, invalid([]any{"body", "glob"}, "value_error", err.Error()))
		return
	}
	files := []string{}
	truncated, err := s.walk(r.Context(), req.Path, maxGlobDepth, func(fi driver.FileInfo) error {
		if g.match(relTo(req.Path, fi.Path), fi.Name) {
			files = append(files, fi.Path)
		}
		return nil
	})
	if err != nil {
		s.failFile(w, "find", req.Path, err)
		return
	}
	ok(w, aio.FileFindResult{Path: req.Path, Files: files, Truncated: truncated})
}

// fileGlobRequest is POST /v1/file/glob.
type fileGlobRequest struct {
	Path            string   `json:"path"`
	Pattern         string   `json:"pattern"`
	Exclude         []string `json:"exclude"`
	IncludeHidden   *bool    `json:"include_hidden"`
	FilesOnly       *bool    `json:"files_only"`
	IncludeMetadata *bool    `json:"include_metadata"`
	MaxResults      *int     `json:"max_results"`
	SortBy          *string  `json:"sort_by"`
	SortDesc        *bool    `json:"sort_desc"`
}

type globFileInfo struct {
	Path         string  `json:"path"`
	Name         string  `json:"name"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	ModifiedTime *string `json:"modified_time"`
}

type fileGlobResult struct {
	Path       string         `json:"path"`
	Pattern    string         `json:"pattern"`
	Files      []globFileInfo `json:"files"`
	TotalCount int            `json:"total_count"`
	Truncated  bool           `json:"truncated"`
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// fileGlob is POST /v1/file/glob: find with metadata, hidden-file and
// exclude handling. Hidden names are skipped unless include_hidden, as
// Python's glob does; files_only (the default) leaves directories out.
func (s *Server) fileGlob(w http.ResponseWriter, r *http.Request) {
	var req fileGlobRequest
	if !s.decode(w, r, &req, "path", "pattern") {
		return
	}
	g, err := newGlobMatcher(req.Pattern)
	if err != nil {
		s.fail(w, invalid([]any{"body", "pattern"}, "value_error", err.Error()))
		return
	}
	var excl []globMatcher
	for _, e := range req.Exclude {
		m, err := newGlobMatcher(e)
		if err != nil {
			s.fail(w, invalid([]any{"body", "exclude"}, "value_error", err.Error()))
			return
		}
		excl = append(excl, m)
	}
	limit := 5000
	if req.MaxResults != nil {
		if *req.MaxResults < 1 || *req.MaxResults > 100000 {
			s.fail(w, invalid([]any{"body", "max_results"}, "value_error", "Input should be between 1 and 100000"))
			return
		}
		limit = *req.MaxResults
	}
	sortBy := "path"
	if req.SortBy != nil && *req.SortBy != "" {
		sortBy = *req.SortBy
	}
	if sortBy != "path" && sortBy != "name" && sortBy != "size" && sortBy != "modified" {
		s.fail(w, invalid([]any{"body", "sort_by"}, "enum", "Input should be 'path', 'name', 'size' or 'modified'"))
		return
	}
	hidden, filesOnly, meta := boolOr(req.IncludeHidden, false), boolOr(req.FilesOnly, true), boolOr(req.IncludeMetadata, true)
	var found []driver.FileInfo
	truncated, err := s.walk(r.Context(), req.Path, maxGlobDepth, func(fi driver.FileInfo) error {
		if !hidden && strings.HasPrefix(fi.Name, ".") {
			return errSkip
		}
		rel := relTo(req.Path, fi.Path)
		for _, e := range excl {
			if e.match(rel, fi.Name) {
				return errSkip
			}
		}
		if (filesOnly && fi.IsDir) || !g.match(rel, fi.Name) {
			return nil
		}
		found = append(found, fi)
		return nil
	})
	if err != nil {
		s.failFile(w, "glob", req.Path, err)
		return
	}
	sortGlob(found, sortBy, boolOr(req.SortDesc, false))
	res := fileGlobResult{Path: req.Path, Pattern: req.Pattern, Files: []globFileInfo{}, TotalCount: len(found), Truncated: truncated}
	if len(found) > limit {
		found, res.Truncated = found[:limit], true
	}
	for _, fi := range found {
		out := globFileInfo{Path: fi.Path, Name: fi.Name, IsDirectory: fi.IsDir}
		if meta {
			size, mt := fi.Size, fi.ModTime.UTC().Format(time.RFC3339Nano)
			out.Size, out.ModifiedTime = &size, &mt
		}
		res.Files = append(res.Files, out)
	}
	ok(w, res)
}

func sortGlob(files []driver.FileInfo, by string, desc bool) {
	key := func(a, b driver.FileInfo) int {
		switch by {
		case "name":
			return strings.Compare(path.Base(a.Path), path.Base(b.Path))
		case "size":
			return int(min(max(a.Size-b.Size, -1), 1))
		case "modified":
			return a.ModTime.Compare(b.ModTime)
		}
		return strings.Compare(a.Path, b.Path)
	}
	sort.SliceStable(files, func(i, j int) bool {
		if desc {
			return key(files[j], files[i]) < 0
		}
		return key(files[i], files[j]) < 0
	})
}
