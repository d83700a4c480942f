package sandbox_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox"
)

func TestRequirementsErrorQuotesPipsLastError(t *testing.T) {
	res := &sandbox.CommandResult{ExitCode: 1, Stderr: "Collecting x\nERROR: first\nmore\nERROR: No matching distribution found for x\n"}
	e := &sandbox.RequirementsError{Mode: "local", Requirements: []string{"x", "y==1"}, Result: res}
	assert.Equal(t, "ERROR: No matching distribution found for x", e.PipError())
	assert.Equal(t, "local: pip install x y==1 failed (exit 1, timed out false): ERROR: No matching distribution found for x", e.Error())

	e = &sandbox.RequirementsError{Mode: "aio", Requirements: []string{"x"}, Result: &sandbox.CommandResult{ExitCode: 1,
		Stderr: "/usr/bin/python3: No module named venv\n"}, Fix: "install python3-venv"}
	assert.Equal(t, "/usr/bin/python3: No module named venv", e.PipError())
	assert.Equal(t, "aio: pip install x failed (exit 1, timed out false): /usr/bin/python3: No module named venv (fix: install python3-venv)", e.Error())
}
