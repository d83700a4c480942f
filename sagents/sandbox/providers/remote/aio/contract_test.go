package aio_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestContract runs the provider contract suite against the remote Handle
// over a real `sage sandboxd --mode passthrough` process, every exchange
// validated against the OpenAPI document.
func TestContract(t *testing.T) {
	v := specValidator(t)
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) *sandbox.Sandbox { return openRemote(t, startSandboxd(t), v) },
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
	cfg := sandbox.Config{Mode: sandbox.Remote, Mounts: []sandbox.VolumeMount{{HostPath: "/tmp", SandboxPath: "/x"}},
		Remote: sandbox.RemoteConfig{Provider: aio.ProviderName, ServerURL: "http://127.0.0.1:1"}}
	_, err := sandbox.New(context.Background(), cfg)
	var ce *sandbox.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sandbox.mounts", ce.Field)

	// Without a server URL the provider orchestrates; this test binary
	// registers no backend, which the error says.
	cfg = sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{Provider: aio.ProviderName,
		ProviderConfig: map[string]any{orchestrator.KeyHome: t.TempDir()}}}
	_, err = sandbox.New(context.Background(), cfg)
	assert.ErrorContains(t, err, `backend "docker" is not registered`)
}

func specValidator(t testing.TB) *spectest.Validator { return spectest.Load(t) }
