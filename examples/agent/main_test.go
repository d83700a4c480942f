package main

import (
	"context"
	"testing"
)

// TestAgentExample runs the program's wiring by hand (a passthrough
// sandbox, the replay model, the built-in tools, the console trace) to its
// end.
func TestAgentExample(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
