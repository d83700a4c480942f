//go:build linux

package local_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestExecutePythonReportsSetupSteps: the venv's creation and a pip
// install are reported through OnSetup, each begun and ended once; a
// call with nothing to set up reports nothing.
func TestExecutePythonReportsSetupSteps(t *testing.T) {
	t.Parallel()
	requirePython(t)
	wheels := t.TempDir()
	os.Chmod(wheels, 0o755)
	buildWheel(t, wheels)
	s := newLocal(t, nil)
	var mu sync.Mutex
	var events []string
	opts := sandbox.PythonOptions{OnSetup: func(step string) func() {
		mu.Lock()
		events = append(events, "begin "+step)
		mu.Unlock()
		return func() {
			mu.Lock()
			events = append(events, "end "+step)
			mu.Unlock()
		}
	}, ExecOptions: sandbox.ExecOptions{Env: map[string]string{"PIP_FIND_LINKS": wheels, "PIP_NO_INDEX": "1"}},
		Requirements: []string{"sagehello==0.1"}}
	res, err := s.ExecutePython(context.Background(), "import sagehello; print(sagehello.GREETING)", opts)
	require.NoError(t, err)
	assert.Equal(t, "hello from a local wheel\n", res.Stdout, res.Stderr)
	assert.Equal(t, []string{
		"begin creating the session's Python environment", "end creating the session's Python environment",
		"begin installing the Python requirements", "end installing the Python requirements",
	}, events)

	events = nil
	opts.Requirements = nil
	res, err = s.ExecutePython(context.Background(), "print(1)", opts)
	require.NoError(t, err)
	assert.Equal(t, "1\n", res.Stdout, res.Stderr)
	assert.Empty(t, events, "the venv exists: no set-up step")
}
