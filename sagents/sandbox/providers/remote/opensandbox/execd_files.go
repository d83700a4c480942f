package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// fileInfo is execd's description of a file.
type fileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type,omitempty"` // file, directory, symlink or other
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"` // octal digits written as decimal: 644
}

// permission is a mode (octal digits written as decimal, 755) with an
// optional owner and group.
type permission struct {
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode"`
}

// octalDigits writes perm the way execd wants it: 0o644 becomes 644.
func octalDigits(perm uint32) int {
	n, _ := strconv.Atoi(strconv.FormatUint(uint64(perm&0o7777), 8))
	return n
}

// multipartBody is an upload body with its content type.
type multipartBody struct {
	*bytes.Reader
	ctype string
}

func (m multipartBody) ContentType() string { return m.ctype }

// upload writes data to path (replacing the file) with mode perm.
func (c *ExecdClient) upload(ctx context.Context, path string, data []byte, perm uint32) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	meta, _ := json.Marshal(map[string]any{"path": path, "mode": octalDigits(perm)})
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	pw, err := mw.CreatePart(h)
	if err == nil {
		_, err = pw.Write(meta)
	}
	if err == nil {
		h = textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="file"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, err = mw.CreatePart(h)
	}
	if err == nil {
		_, err = pw.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return fmt.Errorf("opensandbox: upload %s: %w", path, err)
	}
	body := multipartBody{bytes.NewReader(buf.Bytes()), mw.FormDataContentType()}
	return c.w.call(ctx, "upload "+path, http.MethodPost, "/files/upload", nil, body, nil, http.StatusOK)
}

// download reads the file at path, at most max bytes; a longer file is
// an error.
func (c *ExecdClient) download(ctx context.Context, path string, max int64) ([]byte, error) {
	op := "download " + path
	_, b, err := c.w.fetch(ctx, op, "/files/download", url.Values{"path": {path}}, max+1, http.StatusOK)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("opensandbox: %s: file larger than %d bytes", op, max)
	}
	return b, nil
}

// downloadRange reads the bytes of path that rng (an HTTP byte range
// such as "bytes=0-99" or "bytes=-100") names, at most max, and the
// file's size.
func (c *ExecdClient) downloadRange(ctx context.Context, path, rng string, max int64) ([]byte, int64, error) {
	op := "download " + path
	w := c.w
	w.headers = map[string]string{"Range": rng}
	for k, v := range c.w.headers {
		w.headers[k] = v
	}
	resp, b, err := w.fetch(ctx, op, "/files/download", url.Values{"path": {path}}, max, http.StatusPartialContent, http.StatusOK)
	if err != nil {
		return nil, 0, err
	}
	size := resp.ContentLength
	if cr := resp.Header.Get("Content-Range"); resp.StatusCode == http.StatusPartialContent {
		_, total, ok := strings.Cut(cr, "/")
		if size, err = strconv.ParseInt(total, 10, 64); !ok || err != nil {
			return nil, 0, fmt.Errorf("opensandbox: %s: bad Content-Range %q", op, cr)
		}
	}
	return b, size, nil
}

// info describes the files at paths; a missing one matches
// fs.ErrNotExist.
func (c *ExecdClient) info(ctx context.Context, paths ...string) (map[string]fileInfo, error) {
	out := map[string]fileInfo{}
	err := c.w.call(ctx, fmt.Sprintf("info %q", paths), http.MethodGet, "/files/info", url.Values{"path": paths}, nil, &out, http.StatusOK)
	return out, err
}

// removeFiles deletes files (not directories).
func (c *ExecdClient) removeFiles(ctx context.Context, paths ...string) error {
	return c.w.call(ctx, fmt.Sprintf("remove files %q", paths), http.MethodDelete, "/files", url.Values{"path": paths}, nil, nil, http.StatusOK)
}

// move renames src to dest.
func (c *ExecdClient) move(ctx context.Context, src, dest string) error {
	return c.w.call(ctx, "move "+src, http.MethodPost, "/files/mv", nil, []map[string]string{{"src": src, "dest": dest}}, nil, http.StatusOK)
}

// makeDirs creates directories and their parents (mkdir -p).
func (c *ExecdClient) makeDirs(ctx context.Context, dirs map[string]permission) error {
	return c.w.call(ctx, "make directories", http.MethodPost, "/directories", nil, dirs, nil, http.StatusOK)
}

// RemoveDirs deletes directories and everything in them.
func (c *ExecdClient) RemoveDirs(ctx context.Context, paths ...string) error {
	return c.w.call(ctx, fmt.Sprintf("remove directories %q", paths), http.MethodDelete, "/directories", url.Values{"path": paths}, nil, nil, http.StatusOK)
}

// listDir lists the entries under dir, depth levels down (1: children).
func (c *ExecdClient) listDir(ctx context.Context, dir string, depth int) ([]fileInfo, error) {
	var out []fileInfo
	err := c.w.call(ctx, "list "+dir, http.MethodGet, "/directories/list",
		url.Values{"path": {dir}, "depth": {strconv.Itoa(depth)}}, nil, &out, http.StatusOK)
	return out, err
}
