package yamlstrict

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type level string

func (l *level) UnmarshalText(b []byte) error {
	if s := string(b); s == "low" || s == "high" {
		*l = level(s)
		return nil
	}
	return fmt.Errorf("level %q: want low or high", b)
}

type inner struct {
	Count int    `yaml:"count"`
	Level level  `yaml:"level"`
	Name  string // no tag: "name"
}

type doc struct {
	Items  []inner          `yaml:"items"`
	Extra  map[string]any   `yaml:"extra"`
	Limits map[string]int   `yaml:"limits"`
	Ptr    *inner           `yaml:"ptr"`
	Wait   time.Duration    `yaml:"wait"`
	Flag   bool             `yaml:"flag"`
	Hidden string           `yaml:"-"`
	Nested struct{ A int }  `yaml:"nested"`
	Inline `yaml:",inline"` // its keys are doc's
}

type Inline struct {
	Shared string `yaml:"shared"`
}

func decode(t *testing.T, src string) (*doc, error) {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	var d doc
	err := Decode(&n, "cfg", &d)
	return &d, err
}

func TestDecodeNamesTheKey(t *testing.T) {
	for src, want := range map[string]string{
		"bogus: 1\n": "cfg.bogus: unknown key (line 1); cfg takes extra, flag, items, limits, nested, ptr, shared, wait",
		"items:\n  - count: 1\n  - count: lots\n": `cfg.items[1].count: "lots" is not a whole number (line 3)`,
		"items:\n  - {count: 1, level: mid}\n":    `cfg.items[0].level: level "mid": want low or high (line 2)`,
		"items:\n  - {cuont: 1}\n":                "cfg.items[0].cuont: unknown key (line 2); cfg.items[0] takes count, level, name",
		"items: {count: 1}\n":                     "cfg.items: want a list, not a mapping (line 1)",
		"limits: {a: 1, b: x}\n":                  `cfg.limits.b: "x" is not a whole number (line 1)`,
		"ptr: {count: [1]}\n":                     "cfg.ptr.count: want a whole number, not a list (line 1)",
		"flag: maybe\n":                           `cfg.flag: "maybe" is not true or false (line 1)`,
		"nested: 3\n":                             `cfg.nested: want a mapping of a, not "3" (line 1)`,
		"nested: {a: 1, b: 2}\n":                  "cfg.nested.b: unknown key (line 1); cfg.nested takes a",
		"hidden: x\n":                             "cfg.hidden: unknown key (line 1)",
		"wait: soon\n":                            `cfg.wait: "soon" is not`,
		"items:\n  - &x {count: 1}\n  - *x\n  - {count: z}\n": `cfg.items[2].count: "z" is not a whole number (line 4)`,
	} {
		_, err := decode(t, src)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: got %v, want an *Error", src, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q:\n got %s\nwant %s", src, err, want)
		}
	}
}

func TestDecodeGood(t *testing.T) {
	d, err := decode(t, "items:\n  - {count: 2, level: high, name: n}\nextra: {any: [1, {x: y}]}\nlimits: {a: 3}\n"+
		"ptr: {count: 4}\nflag: true\nshared: s\nwait: 5s\nnested: {a: 6}\nitems2: null\n")
	if err == nil {
		t.Fatal("items2 is unknown")
	}
	d, err = decode(t, "items:\n  - {count: 2, level: high, name: n}\nextra: {any: [1, {x: y}]}\nlimits: {a: 3}\n"+
		"ptr: {count: 4}\nflag: true\nshared: s\nwait: 5s\nnested: {a: 6}\nlimits2:\n")
	if err == nil || !strings.Contains(err.Error(), "limits2: unknown key") {
		t.Fatalf("an unknown key with an empty value is still unknown: %v", err)
	}
	d, err = decode(t, "items:\n  - {count: 2, level: high, name: n}\nextra: {any: [1, {x: y}]}\nlimits: {a: 3}\n"+
		"ptr: {count: 4}\nflag: true\nshared: s\nwait: 5s\nnested: {a: 6}\n")
	if err != nil {
		t.Fatal(err)
	}
	if d.Items[0].Count != 2 || d.Items[0].Level != "high" || d.Items[0].Name != "n" || d.Limits["a"] != 3 ||
		d.Ptr.Count != 4 || !d.Flag || d.Shared != "s" || d.Wait != 5*time.Second || d.Nested.A != 6 {
		t.Fatalf("decoded %+v", d)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"items: [{count: 1}]\n", "bogus: 1", "items: *x", "a: &x [*x]", "ptr: {count: !!str 1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var n yaml.Node
		if yaml.Unmarshal([]byte(src), &n) != nil {
			return
		}
		var d doc
		err := Decode(&n, "cfg", &d)
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("a multi-line error: %q", err)
		}
	})
}
