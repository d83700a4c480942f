package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

// poolingBackend is a fake backend that claims to keep a pool (the
// configuration checks need no running sandbox).
type poolingBackend struct{ *orchestratortest.Backend }

func (poolingBackend) Claim(context.Context, orchestrator.SandboxInfo, string, string) (orchestrator.SandboxInfo, error) {
	return orchestrator.SandboxInfo{}, assert.AnError
}

func (poolingBackend) ListPool(context.Context) ([]orchestrator.SandboxInfo, error) { return nil, nil }

func TestPoolConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pc    map[string]any
		env   string
		field string
	}{
		{"negative", map[string]any{"pool_size": "-1"}, "", "pool_size"},
		{"negative from the environment", nil, "-2", "pool_size"},
		{"larger than max_sandboxes", map[string]any{"pool_size": 3, "max_sandboxes": 2}, "", "pool_size"},
		{"not a number", map[string]any{"pool_size": "many"}, "", "pool_size"},
		{"negative max", map[string]any{"max_sandboxes": "-1"}, "", "max_sandboxes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SAGE_AIO_POOL_SIZE", tc.env)
			_, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{ProviderConfig: tc.pc},
				orchestrator.ProviderOptions{Backend: poolingBackend{newFakeBackend(t)}, Home: t.TempDir()})
			var ce *sandbox.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
	_, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: newFakeBackend(t), Home: t.TempDir(), PoolSize: 1})
	var ce *sandbox.ConfigError
	require.ErrorAs(t, err, &ce, "a backend without Pooler cannot keep a pool")
	assert.Equal(t, "pool_size", ce.Field)

	// Control: a valid pool size within max_sandboxes is accepted. This
	// backend's Claim fails: the thread gets a new sandbox with its files,
	// and the failed slot leaves nothing behind.
	fb := newFakeBackend(t)
	home := t.TempDir()
	p, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{ProviderConfig: map[string]any{"pool_size": 2, "max_sandboxes": 2}},
		orchestrator.ProviderOptions{Backend: poolingBackend{fb}, Home: home})
	require.NoError(t, err)
	assert.Equal(t, 2, p.Pool().Size)
	require.NoError(t, p.WaitPool(context.Background(), 2))
	require.NoError(t, os.MkdirAll(filepath.Join(home, "threads", "t1", "user-data", "workspace"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "threads", "t1", "user-data", "workspace", "f"), []byte("x"), 0o644))
	sid, err := p.Acquire(context.Background(), "t1")
	require.NoError(t, err)
	info, ok := p.Info(sid)
	require.True(t, ok)
	assert.Empty(t, info.PoolSlot, "the claim failed: a sandbox created as without a pool")
	assert.GreaterOrEqual(t, fb.Creates(), 3, "two slots, then the fallback")
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Zero(t, fb.Running(), "Shutdown destroyed the pool and the thread's sandbox")
	assert.FileExists(t, filepath.Join(home, "threads", "t1", "user-data", "workspace", "f"))
	left, _ := os.ReadDir(filepath.Join(home, "pool"))
	assert.Empty(t, left, "no slot directory left")
}
