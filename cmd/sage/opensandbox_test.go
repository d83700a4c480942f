package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestExecOnOpenSandbox runs `sage exec --mode remote --remote-provider
// opensandbox` against the fake lifecycle server and execd: the session
// names the thread, so the second call finds the first one's sandbox.
func TestExecOnOpenSandbox(t *testing.T) {
	srv := opensandboxtest.New(t)
	home := sandboxtest.TempDir(t)
	run := func(args ...string) cliRun {
		cmd := exec.Command(sageBin, append([]string{"exec", "--mode", "remote", "--remote-provider", "opensandbox",
			"--opensandbox-url", srv.URL, "--opensandbox-api-key-env", "OSB_TEST_KEY", "--session", "osb"}, args...)...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "OSB_TEST_KEY="+srv.APIKey,
			"SAGE_OPENSANDBOX_EXECD_TOKEN="+srv.ExecdToken, "SAGE_OPENSANDBOX_WORKSPACE=auto")
		return runCmd(t, cmd)
	}
	r := run("--", "echo made > note.txt; echo out; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Equal(t, "out\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	r = run("--", "cat note.txt")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "made\n", r.stdout, "the session's sandbox is found again")
	assert.Equal(t, 1, srv.Live())

	cmd := exec.Command(sageBin, "exec", "--mode", "remote", "--remote-provider", "opensandbox",
		"--opensandbox-url", srv.URL, "--opensandbox-api-key-env", "OSB_UNSET_KEY", "--", "true")
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home)
	r = runCmd(t, cmd)
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "api_key_env")
	assert.Contains(t, r.stderr, "OSB_UNSET_KEY")
}
