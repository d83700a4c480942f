package aio_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestContract runs the provider contract suite against the remote Handle
// over a real `sage sandboxd --mode passthrough` process, every exchange
// validated against the OpenAPI document.
func TestContract(t *testing.T) {
	v := specValidator(t)
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) sandbox.Handle { return openRemote(t, startSandboxd(t), v) },
		// sandboxd runs on this host in passthrough mode, so the suite can
		// check /proc for survivors; the API reports no task PIDs.
		HostProcesses: true,
		NoTaskPIDs:    true,
	})
	t.Logf("endpoints validated: %v", v.Seen())
}

func TestNewThroughRegistry(t *testing.T) {
	d := startSandboxd(t)
	h := openRemote(t, d, nil)
	defer h.Close(context.Background())
	assert.Equal(t, sandbox.Remote, h.Type())
	assert.Equal(t, d.workspace, h.WorkspacePath())
	assert.Empty(t, h.HostWorkspacePath())
	_, err := h.ToHostPath("x")
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	res, err := h.ExecuteCommand(context.Background(), "echo hi", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "hi\n", res.Stdout)
}

func TestConfigErrors(t *testing.T) {
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{Provider: aio.ProviderName}})
	var ce *sandbox.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sandbox.remote.server_url", ce.Field)
}

func specValidator(t testing.TB) *spectest.Validator { return spectest.Load(t) }
