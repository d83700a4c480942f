package orchestrator_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

func TestShutdownOnSignalIsOptInAndReleases(t *testing.T) {
	b := newFakeBackend(t)
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir()})
	require.NoError(t, err)
	_, err = p.Acquire(context.Background(), "sig-thread")
	require.NoError(t, err)
	require.Equal(t, 1, b.Running())

	stop := p.ShutdownOnSignal(5*time.Second, syscall.SIGUSR1)
	defer stop()
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGUSR1))
	assert.Eventually(t, func() bool { return b.Running() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the signal did not shut the provider down")
	stop()
	stop() // idempotent
}
