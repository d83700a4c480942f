package aioserver

import (
	"strings"
	"testing"
)

// FuzzGlobMatcher: patterns and paths come from clients. Matching never
// panics; "**/" followed by a literal base name matches that name at any
// depth, and a literal relative path matches itself (control).
func FuzzGlobMatcher(f *testing.F) {
	f.Add("**/*.py", "a/b/c.py", "c.py")
	f.Add("d/**", "d/e/f", "f")
	f.Add("[a-", "x", "x")
	f.Add("{a,b}/*.txt", "a/x.txt", "x.txt")
	f.Fuzz(func(t *testing.T, pattern, rel, name string) {
		if g, err := newGlobMatcher(pattern); err == nil {
			_ = g.match(rel, name)
		}
		if name == "" || strings.ContainsAny(name, `/*?[]{}\!`) || strings.HasPrefix(name, ".") {
			return
		}
		g, err := newGlobMatcher("**/" + name)
		if err != nil {
			t.Fatalf("literal name %q: %v", name, err)
		}
		for _, p := range []string{name, "a/" + name, "a/b/c/" + name} {
			if !g.match(p, name) {
				t.Fatalf("**/%s does not match %q", name, p)
			}
		}
	})
}

// FuzzInsertAt: the editor's insert keeps every line of the file and adds
// new_str's lines after line n.
func FuzzInsertAt(f *testing.F) {
	f.Add("a\nb\n", "x", 1)
	f.Add("a", "x\ny", 0)
	f.Add("", "x", 0)
	f.Fuzz(func(t *testing.T, text, ins string, at int) {
		req := strReplaceEditorRequest{Path: "f", NewStr: &ins, InsertLine: &at}
		out, _, err := insertAt(text, req)
		if err != nil {
			return
		}
		want := strings.Count(text, "\n") + strings.Count(ins, "\n")
		if !strings.HasSuffix(ins, "\n") {
			want++
		}
		if text != "" && !strings.HasSuffix(text, "\n") && at < strings.Count(text, "\n")+1 {
			// the last line stays without its newline
		} else if text != "" && !strings.HasSuffix(text, "\n") {
			want++
		}
		if got := strings.Count(out, "\n"); got != want {
			t.Fatalf("insertAt(%q, %q, %d) = %q: %d newlines, want %d", text, ins, at, out, got, want)
		}
		if !strings.Contains(out, strings.TrimSuffix(ins, "\n")) {
			t.Fatalf("insertAt lost new_str: %q", out)
		}
	})
}
