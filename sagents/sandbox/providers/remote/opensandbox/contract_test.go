package opensandbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// remoteConfig is a sandbox config for the provider against srv.
func remoteConfig(srv *opensandboxtest.Server, extra map[string]any) sandbox.Config {
	pc := map[string]any{keyWorkspace: "auto", keyExecdToken: srv.ExecdToken,
		keyReadySeconds: 10, keyExecdTmp: srv.ExecdTmp}
	for k, v := range extra {
		pc[k] = v
	}
	return sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{Provider: providerName,
		ServerURL: srv.URL, APIKey: srv.APIKey, ProviderConfig: pc}}
}

func openSandbox(t *testing.T, srv *opensandboxtest.Server, extra map[string]any) *sandbox.Sandbox {
	t.Helper()
	h, err := sandbox.New(context.Background(), remoteConfig(srv, extra))
	require.NoError(t, err)
	return h
}

// TestContract runs the provider contract suite through the registry
// against the fake lifecycle server and execd, which run commands on
// this host.
func TestContract(t *testing.T) {
	srv := opensandboxtest.New(t)
	sandboxtest.Run(t, sandboxtest.Options{
		New:           func(t *testing.T) *sandbox.Sandbox { return openSandbox(t, srv, nil) },
		HostProcesses: true,
		PythonResults: true,
	})
	assert.Zero(t, srv.Live(), "every anonymous sandbox is deleted at Close")
}

func TestHandleBasics(t *testing.T) {
	srv := opensandboxtest.New(t)
	h := openSandbox(t, srv, nil)
	defer h.Close(context.Background())
	assert.Equal(t, sandbox.Remote, h.Type())
	assert.Empty(t, h.HostWorkspacePath())
	_, err := h.ToHostPath("x")
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	sb := srv.Get(h.ID())
	require.NotNil(t, sb)
	assert.Equal(t, defaultImage, sb.Image)
	assert.Equal(t, "opensandbox", sb.Metadata["sage.provider"])
	require.NoError(t, h.Close(context.Background()))
	require.NoError(t, h.Close(context.Background()), "Close is idempotent")
	_, err = h.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	assert.ErrorIs(t, err, sandbox.ErrClosed)
	assert.Equal(t, "Terminated", srv.Get(h.ID()).State)
}

func TestPythonStateLastsPerSandbox(t *testing.T) {
	srv := opensandboxtest.New(t)
	h := openSandbox(t, srv, nil)
	defer h.Close(context.Background())
	ctx := context.Background()
	_, err := h.ExecutePython(ctx, "x = 20", sandbox.PythonOptions{})
	require.NoError(t, err)
	res, err := h.ExecutePython(ctx, "print(x + 22)", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout)
	res, err = h.ExecutePython(ctx, "1/0", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, res.ExitCode)
	assert.Contains(t, res.Stderr, "ZeroDivisionError")

	other := openSandbox(t, srv, nil)
	defer other.Close(context.Background())
	res, err = other.ExecutePython(ctx, "print('x' in globals())", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, "False\n", res.Stdout, "another sandbox has its own interpreter")
}
