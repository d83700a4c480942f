//go:build linux

package local_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func requirePython(t *testing.T) {
	t.Helper()
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3 python3-venv)")
}

func TestExecutePython(t *testing.T) {
	t.Parallel()
	requirePython(t)
	s := newLocal(t, nil)
	ctx := context.Background()
	// Without requirements, the first call needs no venv: the host's
	// python3 runs the code (issue 37: a venv took ~5 s, unsaid).
	res, err := s.ExecutePython(ctx, "import os, sys\nprint(sys.prefix == sys.base_prefix)\nprint(os.getcwd())\nsys.exit(4)", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, "True\n/workspace\n", res.Stdout, res.Stderr)
	assert.Equal(t, 4, res.ExitCode)
	assert.NoFileExists(t, filepath.Join(runtimeDir(t, s), "venv", "pyvenv.cfg"), "no venv made")
	entries, _ := os.ReadDir(filepath.Join(runtimeDir(t, s), "code"))
	assert.Empty(t, entries, "code files are removed afterwards")

	// A call with requirements makes the venv ("pip" is in every venv:
	// nothing to fetch), which later calls and commands use.
	res, err = s.ExecutePython(ctx, "import sys\nprint(sys.prefix)", sandbox.PythonOptions{Requirements: []string{"pip"},
		ExecOptions: sandbox.ExecOptions{Env: noFetch}})
	require.NoError(t, err)
	assert.Equal(t, local.VenvPath+"\n", res.Stdout, res.Stderr)
	res, err = s.ExecutePython(ctx, "import sys\nprint(sys.prefix)", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, local.VenvPath+"\n", res.Stdout, "once made, the venv runs every call: %s", res.Stderr)
	res = run(t, s, "which python; python -c 'print(1+1)'", sandbox.ExecOptions{})
	assert.Equal(t, local.VenvPath+"/bin/python\n2\n", res.Stdout, "the venv is on PATH for commands: %s", res.Stderr)
}

// noFetch makes a call with Requirements: []string{"pip"} (in every venv
// already) create the venv and bind nothing new: pip has nothing to fetch,
// and a find-links that is no host directory (this machine's
// PIP_FIND_LINKS, say) is no bind to restart a session for.
var noFetch = map[string]string{"PIP_FIND_LINKS": "http://127.0.0.1:9/none", "PIP_NO_INDEX": "1"}

func runtimeDir(t *testing.T, s *sandbox.Sandbox) string {
	t.Helper()
	return s.Driver().(*local.Sandbox).RuntimeDir()
}

// Concurrent calls, from two handles on one session as two processes
// would be, create the venv once.
func TestExecutePythonConcurrentVenv(t *testing.T) {
	t.Parallel()
	requirePython(t)
	rt, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	mk := func() *sandbox.Sandbox {
		h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "s1"})
		require.NoError(t, err)
		t.Cleanup(func() { h.Close(context.Background()) })
		return h
	}
	hs := []*sandbox.Sandbox{mk(), mk()}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			res, err := hs[i%2].ExecutePython(context.Background(), fmt.Sprintf("print(%d)", i), sandbox.PythonOptions{Requirements: []string{"pip"},
				ExecOptions: sandbox.ExecOptions{Env: noFetch}})
			if err == nil && res.Stdout != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("call %d: %q %q", i, res.Stdout, res.Stderr)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}

// buildWheel writes a pure-Python wheel of package sagehello to dir.
func buildWheel(t *testing.T, dir string) {
	files := map[string]string{
		"sagehello/__init__.py":            "GREETING = 'hello from a local wheel'\n",
		"sagehello-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: sagehello\nVersion: 0.1\n",
		"sagehello-0.1.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: sage-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	f, err := os.Create(filepath.Join(dir, "sagehello-0.1-py3-none-any.whl"))
	require.NoError(t, err)
	zw := zip.NewWriter(f)
	record := ""
	for _, name := range []string{"sagehello/__init__.py", "sagehello-0.1.dist-info/METADATA", "sagehello-0.1.dist-info/WHEEL"} {
		w, err := zw.Create(name)
		require.NoError(t, err)
		w.Write([]byte(files[name]))
		sum := sha256.Sum256([]byte(files[name]))
		record += fmt.Sprintf("%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	w, _ := zw.Create("sagehello-0.1.dist-info/RECORD")
	w.Write([]byte(record + "sagehello-0.1.dist-info/RECORD,,\n"))
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}

func TestExecutePythonRequirementsFromLocalWheel(t *testing.T) {
	t.Parallel()
	requirePython(t)
	wheels := sandboxtest.TempDir(t)
	os.Chmod(wheels, 0o755)
	buildWheel(t, wheels)
	s := newLocal(t, nil)
	res, err := s.ExecutePython(context.Background(), "import sagehello; print(sagehello.GREETING)", sandbox.PythonOptions{
		ExecOptions:  sandbox.ExecOptions{Env: map[string]string{"PIP_FIND_LINKS": wheels, "PIP_NO_INDEX": "1"}},
		Requirements: []string{"sagehello==0.1"},
	})
	require.NoError(t, err)
	assert.Equal(t, "hello from a local wheel\n", res.Stdout, res.Stderr)
}

func TestExecutePythonUnreachableIndexIsAClearError(t *testing.T) {
	t.Parallel()
	requirePython(t)
	s := newLocal(t, nil)
	start := time.Now()
	_, err := s.ExecutePython(context.Background(), "print(1)", sandbox.PythonOptions{
		ExecOptions:  sandbox.ExecOptions{Env: map[string]string{"PIP_INDEX_URL": "http://127.0.0.1:1/simple"}},
		Requirements: []string{"definitely-not-here==1.0"},
	})
	var re *sandbox.RequirementsError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Contains(t, err.Error(), "definitely-not-here")
	assert.Less(t, time.Since(start), 2*time.Minute, "an unreachable index must not hang")
}

func TestExecutePythonRejectsOptionsAsRequirements(t *testing.T) {
	s := newLocal(t, nil)
	_, err := s.ExecutePython(context.Background(), "print(1)", sandbox.PythonOptions{Requirements: []string{"--index-url=http://evil"}})
	assert.ErrorContains(t, err, "--index-url=http://evil")
}

func TestExecuteJavaScript(t *testing.T) {
	s := newLocal(t, nil)
	testenv.Command(t, "node", testenv.SetupFix+" (apt-get install nodejs)")
	res, err := s.ExecuteJavaScript(context.Background(), "console.log(6 * 7); process.exit(2)", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout, res.Stderr)
	assert.Equal(t, 2, res.ExitCode)
}
