package main

import (
	"bytes"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCount counts testdata/mod: each way a name gets a user (spelled
// in another package, called as a method, an exported function's
// result, reached through fmt.Stringer or errors.Unwrap, a used type's constant, an
// Example, a README snippet, an adapter module), and the controls that
// get none (a method nobody calls, a constant only a sh block names, a
// variable only the package's own tests use; package main's names are
// not counted).
func TestCount(t *testing.T) {
	root := filepath.Join("testdata", "mod")
	res, err := count(options{
		root:    root,
		modules: []string{filepath.Join(root, "adapters", "x")},
		docs:    []string{filepath.Join(root, "README.md")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(res.pkgs)); !slices.Equal(got, []string{"example.com/m/a", "example.com/m/b"}) {
		t.Fatalf("packages %v, want a and b (not package main)", got)
	}
	a := res.pkgs["example.com/m/a"].names
	want := map[string]bool{
		"Used": true, "Used.M": true, "Used.N": false, "Hidden": true, "New": true, "Hidden.String": true,
		"Kind": true, "KindA": true, "Unused": false, "OnlyTested": false,
		"Wrap": true, "Wrapped": false, "Wrapped.Unwrap": true,
		"Exampled": true, "Documented": true, "ByAdapter": true,
	}
	for id, u := range want {
		got, ok := a[id]
		if !ok {
			t.Errorf("%s not counted", id)
		} else if got != u {
			t.Errorf("%s used = %v, want %v", id, got, u)
		}
	}
	if len(a) != len(want) {
		t.Errorf("a's names %v, want %d", slices.Sorted(maps.Keys(a)), len(want))
	}
	if n, u := res.pkgs["example.com/m/a"].counts(); n != 16 || u != 12 {
		t.Errorf("a: %d exported, %d used; want 16 and 12", n, u)
	}
	var out bytes.Buffer
	res.print(&out, true)
	for _, line := range []string{"total                                                          17     12        5",
		"a:\n\tOnlyTested\n\tUnused\n\tUsed.N\n\tWrapped\n", "b:\n\tB\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestGoSnippets(t *testing.T) {
	md := "text\n```go\nx.A()\n```\n```sh\ny.B\n```\n  ```go\nz.C\n  ```\n"
	if got := goSnippets(md); !slices.Equal(got, []string{"x.A()\n", "z.C\n"}) {
		t.Errorf("goSnippets = %q", got)
	}
}
