package aioserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// maxGrepFile bounds the files grep reads.
const maxGrepFile = 1 << 20

// errTooLarge is a file over the read limit.
type errTooLarge struct{ limit int64 }

func (e *errTooLarge) Error() string { return fmt.Sprintf("file is larger than %d bytes", e.limit) }

// readCapped reads at most limit bytes of p, streaming when the Handle
// can (it then reads limit+1 bytes at most); a larger file is
// *errTooLarge.
func (s *Server) readCapped(ctx context.Context, p string, limit int64) ([]byte, error) {
	rc, _, err := s.h.OpenFile(ctx, p)
	var data []byte
	switch {
	case errors.Is(err, driver.ErrUnsupported):
		if data, err = s.h.ReadFile(ctx, p); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		defer rc.Close()
		if data, err = io.ReadAll(io.LimitReader(rc, limit+1)); err != nil {
			return nil, err
		}
	}
	if int64(len(data)) > limit {
		return nil, &errTooLarge{limit: limit}
	}
	return data, nil
}

func (s *Server) fileRead(w http.ResponseWriter, r *http.Request) {
	var req aio.FileReadRequest
	if !s.decode(w, r, &req, "file") {
		return
	}
	data, err := s.readCapped(r.Context(), req.File, s.opts.MaxReadBytes)
	var tl *errTooLarge
	if errors.As(err, &tl) {
		fe := aio.FileOperationError{Path: req.File, Operation: "read", Message: tl.Error() + " (the server's read limit)", ErrorType: aio.ErrTypeInvalid}
		fileFailed(w, fe, "use GET /v1/file/download, which streams files of any size")
		return
	}
	if err != nil {
		s.failFile(w, "read", req.File, err)
		return
	}
	if !utf8.Valid(data) {
		fe := aio.FileOperationError{Path: req.File, Operation: "read", Message: "file is not UTF-8 text", ErrorType: aio.ErrTypeInvalid}
		fileFailed(w, fe, "use GET /v1/file/download for binary files")
		return
	}
	ok(w, aio.FileReadResult{Content: lineRange(string(data), req.StartLine, req.EndLine), File: req.File})
}

// lineRange keeps lines [start, end) (0-based), as the spec describes.
func lineRange(s string, start, end *int) string {
	if start == nil && end == nil {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	lo, hi := 0, len(lines)
	if start != nil {
		lo = min(max(*start, 0), hi)
	}
	if end != nil {
		hi = min(max(*end, lo), hi)
	}
	return strings.Join(lines[lo:hi], "")
}

func (s *Server) fileWrite(w http.ResponseWriter, r *http.Request) {
	var req aio.FileWriteRequest
	if !s.decode(w, r, &req, "file", "content") {
		return
	}
	data := []byte(req.Content)
	switch req.Encoding {
	case "", aio.EncodingUTF8, aio.EncodingRaw:
		if req.LeadingNewline {
			data = append([]byte("\n"), data...)
		}
		if req.TrailingNewline {
			data = append(data, '\n')
		}
	case aio.EncodingBase64:
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.Content); err != nil {
			s.fail(w, invalid([]any{"body", "content"}, "value_error", "content is not valid base64"))
			return
		}
	default:
		s.fail(w, invalid([]any{"body", "encoding"}, "enum", "Input should be 'utf-8', 'base64' or 'raw'"))
		return
	}
	if err := s.h.WriteFile(r.Context(), req.File, data, driver.WriteOptions{Append: req.Append}); err != nil {
		s.failFile(w, "write", req.File, err)
		return
	}
	n := int64(len(data))
	ok(w, aio.FileWriteResult{File: req.File, BytesWritten: &n})
}

func (s *Server) fileList(w http.ResponseWriter, r *http.Request) {
	var req aio.FileListRequest
	if !s.decode(w, r, &req, "path") {
		return
	}
	files, truncated, err := s.listTree(r.Context(), req)
	if err != nil {
		s.failFile(w, "list", req.Path, err)
		return
	}
	sortFiles(files, req.SortBy, req.SortDesc)
	res := aio.FileListResult{Path: req.Path, Files: files, TotalCount: len(files), Truncated: truncated}
	for _, f := range files {
		if f.IsDirectory {
			res.DirectoryCount++
		} else {
			res.FileCount++
		}
	}
	ok(w, res)
}

func (s *Server) listTree(ctx context.Context, req aio.FileListRequest) ([]aio.FileInfo, bool, error) {
	depth := 1
	if req.Recursive {
		depth = 64
		if req.MaxDepth != nil && *req.MaxDepth > 0 {
			depth = *req.MaxDepth
		}
	}
	files := []aio.FileInfo{}
	truncated, err := s.walk(ctx, req.Path, depth, func(fi driver.FileInfo) error {
		if (req.ShowHidden != nil && !*req.ShowHidden) && strings.HasPrefix(fi.Name, ".") {
			return errSkip
		}
		if len(req.FileTypes) > 0 && !fi.IsDir && !hasExt(fi.Name, req.FileTypes) {
			return nil
		}
		files = append(files, wireInfo(fi, req))
		return nil
	})
	return files, truncated, err
}

var (
	errSkip = errors.New("skip")
	errStop = errors.New("stop")
)

// walk lists dir and, down to depth levels, its subdirectories (symlinks
// are not followed), reading at most Options.MaxEntries entries in all;
// truncated says it stopped there. fn may return errSkip (do not
// descend) or errStop.
func (s *Server) walk(ctx context.Context, dir string, depth int, fn func(driver.FileInfo) error) (truncated bool, err error) {
	count := 0
	var visit func(string, int) error
	visit = func(d string, level int) error {
		entries, more, err := s.h.ListDirectoryLimit(ctx, d, max(s.opts.MaxEntries-count, 1))
		if err != nil {
			return err
		}
		truncated = truncated || more
		for _, e := range entries {
			if count++; count > s.opts.MaxEntries {
				truncated = true
				return errStop
			}
			switch err := fn(e); {
			case errors.Is(err, errSkip):
				continue
			case err != nil:
				return err
			}
			if e.IsDir && level < depth {
				if err := visit(e.Path, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = visit(dir, 1)
	if errors.Is(err, errStop) {
		err = nil
	}
	return truncated, err
}

func hasExt(name string, exts []string) bool {
	for _, e := range exts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

func wireInfo(fi driver.FileInfo, req aio.FileListRequest) aio.FileInfo {
	out := aio.FileInfo{Name: fi.Name, Path: fi.Path, IsDirectory: fi.IsDir}
	if req.IncludeSize == nil || *req.IncludeSize {
		size := fi.Size
		out.Size = &size
	}
	mt := fi.ModTime.UTC().Format(time.RFC3339Nano)
	out.ModifiedTime = &mt
	if req.IncludePermissions != nil && *req.IncludePermissions {
		mode := fi.Mode
		out.Permissions = &mode
	}
	if ext := path.Ext(fi.Name); ext != "" && !fi.IsDir {
		out.Extension = &ext
	}
	return out
}

func sortFiles(files []aio.FileInfo, by string, desc bool) {
	less := func(a, b aio.FileInfo) bool { return a.Path < b.Path }
	switch by {
	case "size":
		less = func(a, b aio.FileInfo) bool { return deref(a.Size) < deref(b.Size) }
	case "modified":
		less = func(a, b aio.FileInfo) bool { return deref(a.ModifiedTime) < deref(b.ModifiedTime) }
	case "type":
		less = func(a, b aio.FileInfo) bool { return a.IsDirectory && !b.IsDirectory }
	}
	sort.SliceStable(files, func(i, j int) bool {
		if desc {
			return less(files[j], files[i])
		}
		return less(files[i], files[j])
	})
}

func (s *Server) fileDownload(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		s.fail(w, invalid([]any{"query", "path"}, "missing", "Field required"))
		return
	}
	if cp := r.URL.Query().Get("change_policy"); cp != "" && cp != "ignore" && cp != "abort" {
		s.fail(w, invalid([]any{"query", "change_policy"}, "enum", "Input should be 'ignore' or 'abort'"))
		return
	}
	var body io.Reader
	rc, _, err := s.h.OpenFile(r.Context(), p)
	switch {
	case errors.Is(err, driver.ErrUnsupported):
		var data []byte
		if data, err = s.h.ReadFile(r.Context(), p); err == nil {
			body = bytes.NewReader(data)
		}
	case err == nil:
		defer rc.Close()
		body = rc
	}
	if err != nil {
		s.failDownload(w, p, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.WriteHeader(http.StatusOK)
	// Streamed: memory stays constant whatever the file's size.
	if _, err := io.Copy(w, body); err != nil {
		s.opts.Logger.Warn("sandboxd: download interrupted", "path", p, "err", err)
	}
}

func (s *Server) fileUpload(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, err)
		return
	}
	target, data, err := parseUpload(r.Header.Get("Content-Type"), body, s.h.WorkspacePath())
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.h.WriteFile(r.Context(), target, data, driver.WriteOptions{}); err != nil {
		s.failFile(w, "upload", target, err)
		return
	}
	ok(w, aio.FileUploadResult{FilePath: target, FileSize: int64(len(data)), Success: true})
}

// parseUpload reads the "file" and "path" parts of a multipart body; the
// path defaults to the file's name in the workspace.
func parseUpload(contentType string, body []byte, ws string) (string, []byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", nil, invalid([]any{"body"}, "value_error", "want a multipart/form-data body")
	}
	mr := multipartReader(body, params["boundary"])
	var target, filename string
	var data []byte
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, invalid([]any{"body"}, "value_error", "bad multipart body: "+err.Error())
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return "", nil, invalid([]any{"body"}, "value_error", "bad multipart body: "+err.Error())
		}
		switch part.FormName() {
		case "file":
			data, filename = b, part.FileName()
			if data == nil {
				data = []byte{}
			}
		case "path":
			target = string(b)
		}
	}
	if data == nil {
		return "", nil, invalid([]any{"body", "file"}, "missing", "Field required")
	}
	if target == "" {
		if filename == "" {
			return "", nil, invalid([]any{"body", "path"}, "missing", "path or a file name is required")
		}
		target = path.Join(ws, path.Base(filename))
	}
	return target, data, nil
}
