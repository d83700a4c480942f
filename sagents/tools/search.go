package tools

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Search limits.
const (
	defaultMaxResults = 100
	maxResultsLimit   = 1000
	// maxGrepFileSize skips larger files in grep.
	maxGrepFileSize = 4 << 20
	// maxWalkEntries bounds a walk of the file tree.
	maxWalkEntries = 50000
)

// skipDirs are not descended into by grep and glob unless named as the
// starting path.
var skipDirs = map[string]bool{".git": true, "node_modules": true, ".sage": true, "__pycache__": true, ".venv": true}

type grepArgs struct {
	Pattern    string `json:"pattern" jsonschema:"minLength=1" jsonschema_description:"A regular expression (Go RE2 syntax), matched per line."`
	Path       string `json:"path,omitempty" jsonschema_description:"File or directory to search (default: the workspace)."`
	Glob       string `json:"glob,omitempty" jsonschema_description:"Only search files whose name (or path relative to path) matches this glob, e.g. *.py or src/**/*.go."`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"minimum=1,maximum=1000" jsonschema_description:"Most matching lines to return (default 100)."`
}

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"minLength=1" jsonschema_description:"A glob: * and ? within a path element, ** across elements, e.g. **/*.py. Relative patterns start at the workspace."`
}

type listArgs struct {
	Path  string `json:"path,omitempty" jsonschema_description:"Directory (default: the workspace)."`
	Depth int    `json:"depth,omitempty" jsonschema:"minimum=1,maximum=10" jsonschema_description:"How many levels to list (default 2)."`
}

// SearchTools returns grep, glob and list_dir. They are implemented in Go
// over the sandbox's file API: no path is ever pasted into a shell command.
func SearchTools() []Tool {
	return []Tool{
		NewFunc("grep", "Search file contents for a regular expression. Returns path:line: text for each match. Skips binary files and .git, node_modules, .sage.", grep),
		NewFunc("glob", "List files whose paths match a glob pattern (** matches any number of directories).", glob),
		NewFunc("list_dir", "List a directory as a tree, to the given depth.", listDir),
	}
}

// walk calls f for every file under root (a directory), depth first in
// name order. f returns false to stop.
func walk(ctx context.Context, h Sandbox, root string, f func(fi sandbox.FileInfo, rel string) bool) (int, error) {
	seen := 0
	var rec func(dir, rel string) (bool, error)
	rec = func(dir, rel string) (bool, error) {
		entries, err := h.ListDirectory(ctx, dir)
		if err != nil {
			return false, err
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		for _, e := range entries {
			if seen++; seen > maxWalkEntries {
				return false, nil
			}
			r := path.Join(rel, e.Name)
			if e.IsDir {
				if skipDirs[e.Name] || e.Symlink {
					continue
				}
				if more, err := rec(path.Join(dir, e.Name), r); err != nil || !more {
					return more, err
				}
				continue
			}
			if !f(e, r) {
				return false, nil
			}
		}
		return true, nil
	}
	_, err := rec(root, "")
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return seen, err
}

func grep(ctx context.Context, h Sandbox, a grepArgs) (Result, error) {
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return Result{}, &Error{Code: CodeInvalidPattern, Message: err.Error(), Hint: "use Go RE2 syntax; escape ( [ . * etc. to match them literally", Err: err}
	}
	var gm *globMatcher
	if a.Glob != "" {
		if gm, err = newGlob(a.Glob); err != nil {
			return Result{}, err
		}
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = defaultMaxResults
	}
	root := a.Path
	if root == "" {
		root = "."
	}
	var out []string
	skipped, files := 0, 0
	search := func(p string) bool {
		b, err := h.ReadFile(ctx, p)
		if err != nil || isBinary(b) {
			skipped++
			return true
		}
		files++
		for i, line := range strings.Split(string(b), "\n") {
			if re.MatchString(line) {
				out = append(out, fmt.Sprintf("%s:%d: %s", p, i+1, clip(strings.ToValidUTF8(line, "\uFFFD"))))
				if len(out) > limit {
					return false
				}
			}
		}
		return true
	}
	if isFile(ctx, h, root) {
		search(root)
	} else if _, err := walk(ctx, h, root, func(fi sandbox.FileInfo, rel string) bool {
		if gm != nil && !gm.match(rel) && !gm.match(fi.Name) {
			return true
		}
		if fi.Size > maxGrepFileSize {
			skipped++
			return true
		}
		return search(path.Join(root, rel))
	}); err != nil {
		return Result{}, err
	}
	more := ""
	if len(out) > limit {
		out, more = out[:limit], fmt.Sprintf(" (stopped at max_results=%d; narrow the pattern, path or glob)", limit)
	}
	head := fmt.Sprintf("%d matching lines in %d files searched%s", len(out), files, more)
	if skipped > 0 {
		head += fmt.Sprintf("; %d binary, unreadable or files over %d MiB skipped", skipped, maxGrepFileSize>>20)
	}
	return Result{Text: head + "\n" + strings.Join(out, "\n")}, nil
}

func isFile(ctx context.Context, h Sandbox, p string) bool {
	_, err := h.ListDirectory(ctx, p)
	if err == nil {
		return false
	}
	ok, _ := h.FileExists(ctx, p)
	return ok
}

func glob(ctx context.Context, h Sandbox, a globArgs) (Result, error) {
	pat := a.Pattern
	root := "."
	if path.IsAbs(pat) {
		root = "/"
		pat = strings.TrimPrefix(pat, "/")
	}
	// Start the walk at the longest prefix without metacharacters.
	parts := strings.Split(path.Clean(pat), "/")
	for len(parts) > 1 && !strings.ContainsAny(parts[0], "*?[") {
		root = path.Join(root, parts[0])
		parts = parts[1:]
	}
	gm, err := newGlob(strings.Join(parts, "/"))
	if err != nil {
		return Result{}, err
	}
	var out []string
	n, err := walk(ctx, h, root, func(_ sandbox.FileInfo, rel string) bool {
		if gm.match(rel) {
			out = append(out, path.Join(root, rel))
		}
		return len(out) <= maxResultsLimit
	})
	if err != nil && !isNotExist(err) {
		return Result{}, err
	}
	head := fmt.Sprintf("%d files match %s", len(out), a.Pattern)
	if len(out) > maxResultsLimit {
		out = out[:maxResultsLimit]
		head = fmt.Sprintf("more than %d files match %s; showing the first %d", maxResultsLimit, a.Pattern, maxResultsLimit)
	} else if n > maxWalkEntries {
		head += fmt.Sprintf(" (the walk stopped after %d entries)", maxWalkEntries)
	}
	return Result{Text: head + "\n" + strings.Join(out, "\n")}, nil
}

func listDir(ctx context.Context, h Sandbox, a listArgs) (Result, error) {
	p := a.Path
	if p == "" {
		p = "."
	}
	depth := a.Depth
	if depth == 0 {
		depth = 2
	}
	tree, err := h.FileTree(ctx, p, sandbox.TreeOptions{MaxDepth: depth, MaxItems: 200})
	if err != nil {
		return Result{}, fileError(ctx, h, p, err)
	}
	var b strings.Builder
	renderTree(&b, tree, "")
	return Result{Text: b.String()}, nil
}

func renderTree(b *strings.Builder, n *sandbox.TreeNode, indent string) {
	b.WriteString(indent + n.Name)
	if n.IsDir {
		b.WriteString("/")
	} else {
		fmt.Fprintf(b, "  (%d bytes)", n.Size)
	}
	b.WriteString("\n")
	for _, c := range n.Children {
		renderTree(b, c, indent+"  ")
	}
	if n.Omitted > 0 {
		fmt.Fprintf(b, "%s  ... %d more entries\n", indent, n.Omitted)
	}
}

// globMatcher matches slash-separated relative paths against a pattern
// whose elements use path.Match syntax, with ** matching zero or more
// elements.
type globMatcher struct{ parts []string }

func newGlob(p string) (*globMatcher, error) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for _, s := range parts {
		if s == "**" {
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, &Error{Code: CodeInvalidPattern, Message: fmt.Sprintf("glob %q: %v", p, err), Err: err}
		}
	}
	return &globMatcher{parts: parts}, nil
}

func (g *globMatcher) match(rel string) bool {
	return matchParts(g.parts, strings.Split(rel, "/"))
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
