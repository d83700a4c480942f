package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Files is the read-only file access resources need; the sandbox of a
// tools.Manager (its Handle method) has it.
type Files interface {
	// WorkspacePath is the workspace as the sandbox names it.
	WorkspacePath() string
	// ReadFile reads a path relative to the workspace.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// ListDirectory lists a directory relative to the workspace.
	ListDirectory(ctx context.Context, path string) ([]sandbox.FileInfo, error)
}

// maxListDepth bounds how deep a resource listing goes.
const maxListDepth = 8

// skipDirs are not listed (they are still readable by URI).
var skipDirs = map[string]bool{".git": true, ".sage": true, "node_modules": true, "__pycache__": true, ".venv": true}

func (s *Server) workspace() string {
	return "/" + strings.Trim(s.opts.Files.WorkspacePath(), "/")
}

func (s *Server) addResources() {
	ws := s.workspace()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "workspace-file",
		Title:       "A file in the sandbox workspace",
		URITemplate: "file://" + strings.TrimSuffix(ws, "/") + "/{+path}",
		Description: "A file under the sandbox workspace " + ws + " (read-only).",
	}, s.readResource)
	// The SDK lists only resources added one by one; the workspace changes
	// under it, so resources/list is answered here from the sandbox.
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			rs, err := s.listResources(ctx)
			if err != nil {
				return nil, err
			}
			return &mcp.ListResourcesResult{Resources: rs}, nil
		}
	})
}

// resourcePath returns the workspace-relative path of a file:// URI under
// workspace. A URI of another scheme or host, outside the workspace, or
// with "..", "." or empty elements is refused with an error wrapping
// fs.ErrPermission (fs.ErrInvalid for one that does not parse).
func resourcePath(workspace, uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", &fs.PathError{Op: "resource", Path: uri, Err: fs.ErrInvalid}
	}
	ws := "/" + strings.Trim(workspace, "/")
	if ws != "/" {
		ws += "/"
	}
	rel, ok := strings.CutPrefix(u.Path, ws)
	if u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.Fragment != "" ||
		!ok || !fs.ValidPath(rel) || rel == "." || strings.ContainsAny(rel, "\\\x00") {
		return "", &fs.PathError{Op: "resource", Path: uri, Err: fmt.Errorf("not a file under the workspace %s: %w", ws, fs.ErrPermission)}
	}
	return rel, nil
}

// resourceURI is the file:// URI of a workspace-relative path.
func (s *Server) resourceURI(rel string) string {
	return (&url.URL{Scheme: "file", Path: strings.TrimSuffix(s.workspace(), "/") + "/" + rel}).String()
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rel, err := resourcePath(s.workspace(), uri)
	if err != nil {
		return nil, err
	}
	b, err := s.opts.Files.ReadFile(ctx, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, resourceNotFound(req, uri)
	case err != nil:
		return nil, fmt.Errorf("mcpserver: read %s: %w", uri, err)
	case int64(len(b)) > s.opts.MaxResourceBytes:
		return nil, fmt.Errorf("mcpserver: %s is %d bytes, more than the %d a resource read returns: read parts of it with the file_read tool",
			uri, len(b), s.opts.MaxResourceBytes)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mimeType(rel, b)}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		c.Text = string(b)
	} else {
		c.Blob = b
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// codeResourceNotFound is the error code of a missing resource in the MCP
// specification up to 2025-11-25 (-32002); later versions (SEP-2164, and
// the SDK's ResourceNotFoundError) use -32602.
const codeResourceNotFound = -32002

// resourceNotFound is the error for a missing resource in the protocol
// version the session negotiated.
func resourceNotFound(req *mcp.ReadResourceRequest, uri string) error {
	version := ""
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil {
			version = p.ProtocolVersion
		}
	}
	if version != "" && version <= "2025-11-25" { // the versions are dates
		return &jsonrpc.Error{Code: codeResourceNotFound, Message: "Resource not found",
			Data: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri))}
	}
	return mcp.ResourceNotFoundError(uri)
}

func mimeType(name string, b []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// listResources walks the workspace breadth first, at most MaxResources
// files and maxListDepth levels, skipping symlinks and skipDirs.
func (s *Server) listResources(ctx context.Context) ([]*mcp.Resource, error) {
	var out []*mcp.Resource
	dirs := []string{"."}
	for depth := 0; depth < maxListDepth && len(dirs) > 0; depth++ {
		var next []string
		for _, d := range dirs {
			ents, err := s.opts.Files.ListDirectory(ctx, d)
			if err != nil {
				if d == "." {
					return nil, fmt.Errorf("mcpserver: list the workspace: %w", err)
				}
				continue // gone or unreadable since its parent was listed
			}
			for _, e := range ents {
				rel := path.Join(d, e.Name)
				switch {
				case e.Symlink:
				case e.IsDir:
					if !skipDirs[e.Name] {
						next = append(next, rel)
					}
				default:
					out = append(out, &mcp.Resource{URI: s.resourceURI(rel), Name: rel, Size: e.Size,
						MIMEType: mime.TypeByExtension(path.Ext(rel))})
					if len(out) >= s.opts.MaxResources {
						return out, nil
					}
				}
			}
		}
		dirs = next
	}
	return out, nil
}
