package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out, errOut bytes.Buffer
	run(&out, &errOut)
	want := "session alice: 750 tokens\nsession bob: 125 tokens\ntool read_file: 1 failed call(s)\n"
	if out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if n := strings.Count(errOut.String(), "invoke_workflow chat-turn"); n != 3 {
		t.Errorf("console printed %d trees, want 3:\n%s", n, errOut.String())
	}
	if !strings.Contains(errOut.String(), "ERROR[_OTHER]: read_file: no such file") {
		t.Errorf("console output lacks the tool error:\n%s", errOut.String())
	}
}
