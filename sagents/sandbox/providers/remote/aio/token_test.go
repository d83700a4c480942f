package aio_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
)

// TestSandboxdTokenByDefault: a loopback sandboxd without --token makes a
// token, saves it 0600 in a 0700 $SAGE_HOME/sandboxd, and requires it; a
// client with the same SAGE_HOME finds it, one with another home is
// refused. A second sandboxd reuses it.
func TestSandboxdTokenByDefault(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "")
	require.NotEmpty(t, d.token)
	fi, err := os.Stat(filepath.Join(home, "sandboxd", "token"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(home, "sandboxd"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	log, err := os.ReadFile(d.log)
	require.NoError(t, err)
	assert.Contains(t, string(log), d.token, "the token is printed on stderr")

	resp, err := http.Get(d.url + "/v1/sandbox")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a token-less request is refused")

	t.Setenv("SAGE_HOME", home)
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Remote,
		Remote: sandbox.RemoteConfig{Provider: aio.ProviderName, ServerURL: d.url}})
	require.NoError(t, err, "the loopback client reads the token file")
	res, err := h.ExecuteCommand(context.Background(), "echo ok", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ok\n", res.Stdout)
	h.Close(context.Background())

	d2 := startDaemon(t, home, "")
	assert.Equal(t, d.token, d2.token, "an existing token is reused")

	t.Setenv("SAGE_HOME", t.TempDir())
	_, err = aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: d.url})
	var ae *aioapi.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, http.StatusUnauthorized, ae.Status)
}

// TestSandboxdNoToken: --no-token on loopback serves without a token (the
// control of the test above); off loopback it is refused.
func TestSandboxdNoToken(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "", "--no-token")
	resp, err := http.Get(d.url + "/v1/sandbox")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = os.Stat(filepath.Join(home, "sandboxd", "token"))
	assert.ErrorIs(t, err, os.ErrNotExist, "--no-token writes no token")
}

func TestReadTokenFileRefusesAReadableFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte("abc\n"), 0o644))
	_, err := aioapi.ReadTokenFile(p)
	assert.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(p, 0o600))
	tok, err := aioapi.ReadTokenFile(p)
	require.NoError(t, err)
	assert.Equal(t, "abc", tok)
	_, err = aioapi.ReadTokenFile(p + ".missing")
	assert.ErrorIs(t, err, os.ErrNotExist)
}
