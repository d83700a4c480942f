package main

import (
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestSandboxFlagsMendTheEnvironment: the flags stand in front of their
// variables, so the fix line's --remote-provider works even when
// SAGE_SANDBOX_MODE=remote is what lacked a provider.
func TestSandboxFlagsMendTheEnvironment(t *testing.T) {
	config := func(args ...string) (sandbox.Config, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var sf sandboxFlags
		sf.register(fs)
		require.NoError(t, fs.Parse(args))
		return sf.config()
	}
	t.Setenv("SAGE_HOME", t.TempDir())
	t.Setenv("SAGE_SANDBOX_MODE", "remote")
	t.Setenv("SAGE_REMOTE_PROVIDER", "")
	_, err := config()
	require.Error(t, err)
	assert.Equal(t, "remote mode needs a provider: set --remote-provider aio or SAGE_REMOTE_PROVIDER=aio", err.Error())
	var se *settingError
	assert.True(t, errors.As(err, &se), "a bad setting exits 2")

	c, err := config("--remote-provider", "aio")
	require.NoError(t, err)
	assert.Equal(t, sandbox.Remote, c.Mode)
	assert.Equal(t, "aio", c.Remote.Provider)
	assert.Equal(t, "keep", c.Remote.ProviderConfig["shutdown_policy"])

	c, err = config("--mode", "passthrough")
	require.NoError(t, err)
	assert.Equal(t, sandbox.Passthrough, c.Mode)

	_, err = config("--mode", "vm")
	assert.EqualError(t, err, `sandbox config: --mode="vm": unknown mode (want local, remote or passthrough)`)
	_, err = config("--remote-provider", "aio", "--remote-url", "ftp://x")
	assert.ErrorContains(t, err, `--remote-url="ftp://x"`)
}
