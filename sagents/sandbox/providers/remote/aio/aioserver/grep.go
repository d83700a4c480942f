package aioserver

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"path"
	"regexp"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

func (s *Server) fileGrep(w http.ResponseWriter, r *http.Request) {
	var req aio.FileGrepRequest
	if !s.decode(w, r, &req, "path", "pattern") {
		return
	}
	re, err := grepPattern(req)
	if err != nil {
		s.fail(w, invalid([]any{"body", "pattern"}, "value_error", err.Error()))
		return
	}
	limit := 500
	if req.MaxResults != nil {
		if *req.MaxResults < 1 || *req.MaxResults > 10000 {
			s.fail(w, invalid([]any{"body", "max_results"}, "value_error", "Input should be between 1 and 10000"))
			return
		}
		limit = *req.MaxResults
	}
	res, err := s.grep(r.Context(), req, re, limit)
	if err != nil {
		s.failFile(w, "grep", req.Path, err)
		return
	}
	ok(w, res)
}

func grepPattern(req aio.FileGrepRequest) (*regexp.Regexp, error) {
	p := req.Pattern
	if req.FixedStrings {
		p = regexp.QuoteMeta(p)
	}
	if req.CaseInsensitive {
		p = "(?i)" + p
	}
	return regexp.Compile(p)
}

func (s *Server) grep(ctx context.Context, req aio.FileGrepRequest, re *regexp.Regexp, limit int) (aio.FileGrepResult, error) {
	res := aio.FileGrepResult{Path: req.Path, Pattern: req.Pattern, Matches: []aio.GrepMatch{}}
	searched, matched := 0, 0
	walkCut, err := s.walk(ctx, req.Path, 64, func(fi driver.FileInfo) error {
		if fi.IsDir || fi.Symlink || fi.Size > maxGrepFile || !included(fi.Name, req.Include, req.Exclude) {
			return nil
		}
		data, err := s.readCapped(ctx, fi.Path, maxGrepFile)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		searched++
		n := grepFile(fi.Path, data, re, &res, limit)
		if n > 0 {
			matched++
		}
		if res.Truncated {
			return errStop
		}
		return nil
	})
	res.Truncated = res.Truncated || walkCut
	res.MatchCount = len(res.Matches)
	res.FilesSearched, res.FilesMatched = &searched, &matched
	return res, err
}

func grepFile(name string, data []byte, re *regexp.Regexp, res *aio.FileGrepResult, limit int) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxGrepFile)
	for line := 1; sc.Scan(); line++ {
		if !re.Match(sc.Bytes()) {
			continue
		}
		if len(res.Matches) >= limit {
			res.Truncated = true
			return n
		}
		res.Matches = append(res.Matches, aio.GrepMatch{File: name, LineNumber: line, LineContent: sc.Text()})
		n++
	}
	return n
}

func included(name string, include, exclude []string) bool {
	for _, p := range exclude {
		if m, _ := path.Match(p, name); m {
			return false
		}
	}
	if len(include) == 0 {
		return true
	}
	for _, p := range include {
		if m, _ := path.Match(p, name); m {
			return true
		}
	}
	return false
}
