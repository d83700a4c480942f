package driver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/registry"
)

func TestRegistry(t *testing.T) {
	const mode Type = "passthrough"
	saved := modes
	modes = registry.New[Type, Factory]("sandbox: Register", "mode ")
	t.Cleanup(func() { modes = saved })

	_, err := Lookup(Local)
	assert.ErrorContains(t, err, `mode "local" is not registered (known: none)`)

	called := false
	Register(mode, func(ctx context.Context, cfg Config) (Driver, error) { called = true; return struct{ Driver }{}, nil })
	assert.Panics(t, func() { Register(mode, func(context.Context, Config) (Driver, error) { return nil, nil }) })
	assert.Panics(t, func() { Register("other", nil) })
	assert.Equal(t, []Type{mode}, Modes())

	_, err = Lookup(Local)
	assert.ErrorContains(t, err, "known: passthrough")
	f, err := Lookup(mode)
	require.NoError(t, err)
	_, err = f(context.Background(), Config{Mode: mode})
	require.NoError(t, err)
	assert.True(t, called)
}
