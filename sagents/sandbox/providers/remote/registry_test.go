package remote

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

type fakeHandle struct{ driver.Driver }

func TestRemoteModeDispatchesByProvider(t *testing.T) {
	var got sandbox.Config
	Register("fake-for-test", func(_ context.Context, cfg sandbox.Config) (driver.Driver, error) {
		got = cfg
		return fakeHandle{}, nil
	})
	assert.Contains(t, Providers(), "fake-for-test")
	assert.Panics(t, func() {
		Register("fake-for-test", func(context.Context, sandbox.Config) (driver.Driver, error) { return nil, nil })
	})
	assert.Panics(t, func() { Register("nil-factory", nil) })

	cfg := sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{Provider: "fake-for-test", ServerURL: "http://127.0.0.1:1"}}
	h, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	assert.IsType(t, fakeHandle{}, h.Driver())
	assert.Equal(t, "http://127.0.0.1:1", got.Remote.ServerURL)

	cfg.Remote.Provider = "nope"
	_, err = sandbox.New(context.Background(), cfg)
	var ce *sandbox.ConfigError
	require.ErrorAs(t, err, &ce, "an unknown provider is a bad setting")
	assert.Equal(t, "sandbox.remote.provider", ce.Field)
	assert.ErrorContains(t, err, `sandbox.remote.provider="nope": not a registered remote provider (known: fake-for-test`)
}
