package registry

import (
	"slices"
	"testing"
)

type factory func() int

func TestRegistry(t *testing.T) {
	r := New[string, factory]("test: Register", "mode ")
	if got := r.Known(); got != "none" {
		t.Fatalf("Known of an empty registry = %q, want none", got)
	}
	r.Add("b", func() int { return 2 })
	r.Add("a", func() int { return 1 })
	if f, ok := r.Get("b"); !ok || f() != 2 {
		t.Fatalf("Get(b) = %v, %v", f, ok)
	}
	if _, ok := r.Get("c"); ok {
		t.Fatal("Get(c) found a factory nobody registered")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v, want [a b]", got)
	}
	if got := r.Known(); got != "a, b" {
		t.Fatalf("Known = %q, want \"a, b\"", got)
	}
	mustPanic(t, "test: Register called twice for mode a", func() { r.Add("a", func() int { return 3 }) })
	mustPanic(t, "test: Register factory is nil for mode z", func() { r.Add("z", nil) })
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		if got := recover(); got != want {
			t.Fatalf("panic %v, want %q", got, want)
		}
	}()
	f()
}
