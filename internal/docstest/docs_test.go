package docstest

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root directory, two levels up.
const root = "../.."

// guide returns the guide's Markdown files, by path relative to root.
func guide(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{filepath.Join(root, "README.md")}, paths...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		files[rel] = string(b)
	}
	return files
}

// block is one fenced code block of a Markdown file.
type block struct {
	lang, text string
	line       int
}

func blocks(md string) []block {
	var out []block
	var cur *block
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: n}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}

// normalize drops indentation and blank lines: a snippet matches code
// "modulo indentation".
func normalize(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// contains reports whether want appears as consecutive lines of have.
func contains(have, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(have); i++ {
		ok := true
		for j := range want {
			if have[i+j] != want[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// unit is code the tests run: an Example function that has an Output
// comment (go test compiles it, runs it and compares its output), or a
// file of a program under examples/ that has tests of its own.
type unit struct {
	name    string
	lines   []string
	imports []string
}

var exampleFunc = regexp.MustCompile(`(?m)^func Example\w*\(\) \{\n(?s:.*?)\n\}\n`)

func importLines(src string) []string {
	_, rest, ok := strings.Cut(src, "\nimport (\n")
	if !ok {
		return nil
	}
	decl, _, _ := strings.Cut(rest, "\n)\n")
	return normalize(decl)
}

// units reads every executed example in the core module and the adapter
// modules (which make test runs too).
func units(t *testing.T) []unit {
	t.Helper()
	var out []unit
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "tools" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		imports := importLines(src)
		if strings.HasPrefix(rel, "examples"+string(filepath.Separator)) && !strings.HasSuffix(p, "_test.go") {
			tests, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*_test.go"))
			if len(tests) > 0 {
				out = append(out, unit{name: rel, lines: normalize(src), imports: imports})
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			for _, fn := range exampleFunc.FindAllString(src, -1) {
				if strings.Contains(fn, "\n\t// Output:") {
					name, _, _ := strings.Cut(strings.TrimPrefix(fn, "func "), "(")
					out = append(out, unit{name: rel + ": " + name, lines: normalize(fn), imports: imports})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found only %d executed examples under %s: the walk is broken", len(out), root)
	}
	return out
}

// found returns the unit a Go snippet is taken from ("" when none). A
// snippet that is only an import declaration matches when each of its
// import specs is one of an executed example's file.
func found(snippet string, us []unit) string {
	want := normalize(snippet)
	if len(want) > 2 && want[0] == "import (" && want[len(want)-1] == ")" {
		for _, u := range us {
			n := 0
			for _, spec := range want[1 : len(want)-1] {
				if contains(u.imports, []string{spec}) {
					n++
				}
			}
			if n == len(want)-2 {
				return u.name
			}
		}
		return ""
	}
	for _, u := range us {
		if contains(u.lines, want) {
			return u.name
		}
	}
	return ""
}

// TestGoSnippetsRun: every ```go block of README.md and docs/*.md is, line
// for line (indentation aside), code the tests compile and run, so a
// snippet that drifts from the API fails make test.
func TestGoSnippetsRun(t *testing.T) {
	us := units(t)
	n := 0
	for file, md := range guide(t) {
		for _, b := range blocks(md) {
			if b.lang != "go" {
				continue
			}
			n++
			if u := found(b.text, us); u == "" {
				t.Errorf("%s:%d: this Go snippet is in no Example function with an Output comment and no tested program under examples/; "+
					"copy it from the example it shows (or add the example), so the tests run it:\n%s", file, b.line, b.text)
			} else {
				t.Logf("%s:%d: from %s", file, b.line, u)
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d Go snippets in the guide, want at least the README's three", n)
	}
}

// TestDriftedSnippetIsCaught is the control of TestGoSnippetsRun: each
// snippet of the README, changed by one identifier or cut to a line that
// no example has, is no longer found.
func TestDriftedSnippetIsCaught(t *testing.T) {
	us := units(t)
	md := guide(t)["README.md"]
	checked := 0
	for _, b := range blocks(md) {
		if b.lang != "go" || strings.HasPrefix(strings.TrimSpace(b.text), "import") {
			continue
		}
		if found(b.text, us) == "" {
			t.Fatalf("README.md:%d: the snippet itself is not found (TestGoSnippetsRun says why)", b.line)
		}
		drifted := strings.Replace(b.text, "err", "errr", 1)
		if u := found(drifted, us); u != "" {
			t.Errorf("README.md:%d: a drifted snippet was found in %s", b.line, u)
		}
		added := b.text + "fmt.Println(\"a line no example has\")\n"
		if u := found(added, us); u != "" {
			t.Errorf("README.md:%d: a snippet with an extra line was found in %s", b.line, u)
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("checked %d README snippets, want 3", checked)
	}
	if found("import (\n\t\"example.com/not/imported\"\n)\n", us) != "" {
		t.Error("an import no example has was found")
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// slug is GitHub's anchor of a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(md string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(l, "#") {
			out[slug(strings.TrimLeft(l, "#"))] = true
		}
	}
	return out
}

// TestLinksResolve: every relative link of the guide names a file of the
// repository, and every #anchor a heading of the page it points to.
func TestLinksResolve(t *testing.T) {
	files := guide(t)
	for file, md := range files {
		for _, m := range link.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: %v", file, target, err)
					continue
				}
			}
			if anchor != "" {
				md, ok := files[filepath.ToSlash(dest)]
				if !ok {
					t.Errorf("%s: link %q: an anchor into a file that is not part of the guide", file, target)
				} else if !anchors(md)[anchor] {
					t.Errorf("%s: link %q: %s has no heading with that anchor", file, target, dest)
				}
			}
		}
	}
}

// TestEveryPageIsLinkedFromTheREADME: a docs page the README's "Where
// next" does not name is a page nobody finds.
func TestEveryPageIsLinkedFromTheREADME(t *testing.T) {
	files := guide(t)
	readme := files["README.md"]
	for file := range files {
		if file != "README.md" && !strings.Contains(readme, "]("+filepath.ToSlash(file)+")") {
			t.Errorf("README.md does not link %s: add it to the table under \"Where next\"", file)
		}
	}
}

// TestREADMEStartsWithTheTwoCommands: the README opens with make demo and
// make test, the two commands a fresh machine needs, and stays a short read.
func TestREADMEStartsWithTheTwoCommands(t *testing.T) {
	readme := guide(t)["README.md"]
	bs := blocks(readme)
	if len(bs) == 0 || bs[0].lang != "sh" {
		t.Fatal("README.md does not open with a sh block")
	}
	var cmds []string
	for _, l := range strings.Split(bs[0].text, "\n") {
		if c, _, _ := strings.Cut(l, "#"); strings.TrimSpace(c) != "" {
			cmds = append(cmds, strings.TrimSpace(c))
		}
	}
	if len(cmds) < 2 || cmds[0] != "make demo" || cmds[1] != "make test" {
		t.Errorf("README.md's first commands are %q, want make demo and make test", cmds)
	}
	if n := strings.Count(readme, "\n"); n > 200 {
		t.Errorf("README.md has %d lines: it is a two-minute read; move the details to a docs/ page", n)
	}
}
