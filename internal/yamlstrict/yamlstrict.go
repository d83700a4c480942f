// Package yamlstrict decodes a YAML node into a Go value strictly
// (unknown keys are errors) and names what is wrong by the key a user
// wrote, not by a Go type: "sandbox.local.memory_limit_mb: "lots" is not
// a whole number (line 4)", "sandbox.local.bogus: unknown key (line 3);
// sandbox.local takes cpu_time_limit, memory_limit_mb, ...".
package yamlstrict

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is the first wrong key of a document.
type Error struct {
	Path  string // the key as written, dotted from the root: "sandbox.local.memory_limit_mb", "rules[1].decision"
	Line  int
	Value string // the scalar found there, if any
	// Reason says what is wrong.
	Reason string
	// Unknown: the key is not one its mapping (Parent) may have, whose
	// keys are Keys.
	Unknown bool
	Parent  string
	Keys    []string
}

func (e *Error) Error() string { return e.Path + ": " + e.Detail() }

// Detail is the error without its path: the reason, the line, the hint.
func (e *Error) Detail() string {
	s := fmt.Sprintf("%s (line %d)", e.Reason, e.Line)
	if e.Unknown {
		s += fmt.Sprintf("; %s takes %s", orTop(e.Parent), strings.Join(e.Keys, ", "))
	}
	return s
}

// under puts e below the key prefix: the error of a custom unmarshaler
// that decoded its own node with Decode.
func (e *Error) under(prefix string) *Error {
	r := *e
	if e.Path == "" || e.Path == orTop("") {
		r.Path = orTop(prefix)
	} else if strings.HasPrefix(e.Path, "[") {
		r.Path = orTop(prefix) + e.Path
	} else {
		r.Path = join(prefix, e.Path)
	}
	r.Parent = join(prefix, e.Parent)
	return &r
}

// Decode decodes n into v, a pointer, after checking every key and value
// of n against v's type: the first key v's type does not have, or value
// it cannot take, is an *Error naming it under root (the path n stands
// for, "" for the top). Custom unmarshalers (yaml.Unmarshaler,
// encoding.TextUnmarshaler) are tried on their own node, so their errors
// are named too.
func Decode(n *yaml.Node, root string, v any) error {
	if err := check(n, reflect.TypeOf(v), root); err != nil {
		return err
	}
	if err := n.Decode(v); err != nil {
		return &Error{Path: orTop(root), Line: n.Line, Reason: oneLine(err.Error())}
	}
	return nil
}

var (
	unmarshaler     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check walks n along t.
func check(n *yaml.Node, t reflect.Type, path string) error {
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		if reflect.PointerTo(t.Elem()).Implements(unmarshaler) || reflect.PointerTo(t.Elem()).Implements(textUnmarshaler) {
			break
		}
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value leaves the field alone
	}
	pt := t
	if t.Kind() != reflect.Pointer {
		pt = reflect.PointerTo(t)
	}
	if pt.Implements(unmarshaler) || (pt.Implements(textUnmarshaler) && n.Kind == yaml.ScalarNode) {
		if err := n.Decode(reflect.New(pt.Elem()).Interface()); err != nil {
			if ye, ok := errors.AsType[*Error](err); ok {
				return ye.under(path)
			}
			return &Error{Path: orTop(path), Line: n.Line, Value: scalar(n), Reason: reason(err)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return mismatch(n, path, "a mapping of "+strings.Join(keys(t), ", "))
		}
		fields := structFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				return &Error{Path: join(path, k.Value), Line: k.Line, Reason: "unknown key",
					Unknown: true, Parent: path, Keys: keys(t)}
			}
			if err := check(val, f, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return mismatch(n, path, "a mapping")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return mismatch(n, path, "a list")
		}
		for i, c := range n.Content {
			if err := check(c, t.Elem(), fmt.Sprintf("%s[%d]", orTop(path), i)); err != nil {
				return err
			}
		}
	case reflect.Interface:
	default:
		if n.Kind != yaml.ScalarNode {
			return mismatch(n, path, want(t))
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return &Error{Path: orTop(path), Line: n.Line, Value: n.Value, Reason: fmt.Sprintf("%q is not %s", n.Value, want(t))}
		}
	}
	return nil
}

// structFields maps the YAML keys of struct t to their types, inlined
// structs included, as yaml.v3 names them.
func structFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range structFields(ft) {
					m[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func keys(t reflect.Type) []string {
	var out []string
	for k := range structFields(t) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mismatch(n *yaml.Node, path, wanted string) error {
	found := map[yaml.Kind]string{yaml.MappingNode: "a mapping", yaml.SequenceNode: "a list", yaml.ScalarNode: fmt.Sprintf("%q", n.Value)}[n.Kind]
	if found == "" {
		found = "something else"
	}
	return &Error{Path: orTop(path), Line: n.Line, Value: scalar(n), Reason: fmt.Sprintf("want %s, not %s", wanted, found)}
}

// want names what a scalar of kind t is.
func want(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}

// reason is a custom unmarshaler's error without the line it may start
// with (the Error says the line).
func reason(err error) string {
	s := oneLine(err.Error())
	if rest, ok := strings.CutPrefix(s, "line "); ok {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			s = after
		}
	}
	return s
}

func scalar(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

func join(path, key string) string {
	if path == "" || key == "" {
		return path + key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

func oneLine(s string) string {
	s = strings.TrimPrefix(s, "yaml: ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	return s
}
