// Package pyindex serves Python packages for tests: Wheel writes a tiny
// pure-Python wheel, and Server serves wheels as a PEP 503 "simple"
// index over HTTP, counting the downloads, so pip can install from it
// with no internet.
package pyindex

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Wheel returns the file name and content of a py3-none-any wheel of
// project name at version whose module name (the project name with
// dashes as underscores) holds the Python source module.
func Wheel(name, version, module string) (string, []byte, error) {
	dist := strings.ReplaceAll(name, "-", "_")
	info := dist + "-" + version + ".dist-info/"
	files := []struct{ name, body string }{
		{dist + "/__init__.py", module},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sage-pyindex\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			return "", nil, err
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return "", nil, err
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		return "", nil, err
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		return "", nil, err
	}
	if err := zw.Close(); err != nil {
		return "", nil, err
	}
	return dist + "-" + version + "-py3-none-any.whl", buf.Bytes(), nil
}

// Server is a PEP 503 simple index of wheels.
type Server struct {
	// URL is the index's base URL, ending in /simple/ (for PIP_INDEX_URL).
	URL string
	// Host is the address's host (for PIP_TRUSTED_HOST).
	Host      string
	srv       *http.Server
	mu        sync.Mutex
	files     map[string][]byte // file name -> wheel
	downloads atomic.Int64
}

// normalize is PEP 503's name normalization.
func normalize(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// Serve listens on host (an IP address, port 0) and serves files, keyed
// by wheel file name. Close stops it.
func Serve(host string, files map[string][]byte) (*Server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("pyindex: listen on %s: %w", host, err)
	}
	s := &Server{Host: host, URL: "http://" + ln.Addr().String() + "/simple/", files: files}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Downloads counts the wheels served.
func (s *Server) Downloads() int64 { return s.downloads.Load() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// ServeHTTP answers /simple/, /simple/<project>/ and /files/<wheel>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	projects := map[string][]string{}
	for f := range s.files {
		p := normalize(strings.SplitN(f, "-", 2)[0])
		projects[p] = append(projects[p], f)
	}
	switch p := r.URL.Path; {
	case p == "/simple/":
		page(w, slices.Sorted(maps.Keys(projects)), func(n string) string { return "/simple/" + n + "/" })
	case strings.HasPrefix(p, "/simple/"):
		fs, ok := projects[normalize(strings.Trim(strings.TrimPrefix(p, "/simple/"), "/"))]
		if !ok {
			http.NotFound(w, r)
			return
		}
		sort.Strings(fs)
		page(w, fs, func(f string) string {
			sum := sha256.Sum256(s.files[f])
			return "/files/" + f + "#sha256=" + hex.EncodeToString(sum[:])
		})
	case strings.HasPrefix(p, "/files/"):
		body, ok := s.files[strings.TrimPrefix(p, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		s.downloads.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

func page(w http.ResponseWriter, items []string, href func(string) string) {
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<!DOCTYPE html>\n<html><body>\n")
	for _, it := range items {
		fmt.Fprintf(w, "<a href=\"%s\">%s</a>\n", html.EscapeString(href(it)), html.EscapeString(it))
	}
	fmt.Fprint(w, "</body></html>\n")
}
