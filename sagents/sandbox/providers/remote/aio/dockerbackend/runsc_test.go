package dockerbackend_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// requireRunsc fails (or skips with SAGE_TEST_ALLOW_SKIP=1) when the
// engine has no runsc runtime.
func requireRunsc(t testing.TB, f *fixture) *dockerbackend.Backend {
	t.Helper()
	b, err := dockerbackend.NewChecked(context.Background(), dockerbackend.Options{Client: f.cli, Prefix: f.prefix, Runtime: "runsc"})
	if err != nil {
		unavailable(t, "the Docker runtime runsc: %v; fix: bash .ci/setup.d/50-runsc.sh", err)
	}
	return b
}

// TestRunscKernel proves the sandbox's commands run on gVisor's kernel:
// /proc/version inside is gVisor's, under runc it is the host's.
func TestRunscKernel(t *testing.T) {
	f := newFixture(t)
	b := requireRunsc(t, f)
	for _, tc := range []struct {
		backend *dockerbackend.Backend
		gvisor  bool
	}{{b, true}, {f.backend(t), false}} {
		p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.Backend = tc.backend })
		sid := acquire(t, p, "kernel-"+strconv.FormatBool(tc.gvisor))
		out := exec1(t, p, sid, "cat /proc/version")
		assert.Equal(t, tc.gvisor, strings.Contains(strings.ToLower(out), "gvisor"), "%q", out)
	}
}

// TestUnknownRuntimeFailsAtNew: a runtime the engine lacks fails at
// sandbox.New, naming daemon.json, and creates nothing.
func TestUnknownRuntimeFailsAtNew(t *testing.T) {
	f := newFixture(t)
	cfg := sandbox.Config{Mode: sandbox.Remote, SandboxID: "t-rt", Remote: sandbox.RemoteConfig{Provider: aio.ProviderName,
		ProviderConfig: map[string]any{orchestrator.KeyContainerPrefix: f.prefix, orchestrator.KeyHome: f.home, orchestrator.KeyRuntime: "sage-no-such-runtime"}}}
	_, err := sandbox.New(ctxT(t), cfg)
	require.ErrorIs(t, err, dockerbackend.ErrUnknownRuntime)
	assert.Contains(t, err.Error(), "daemon.json")
	assert.Empty(t, f.containers(t))
}

// BenchmarkFirst200Runsc is BenchmarkBaselineDockerRun under gVisor (the
// Docker runtime runsc): create, start and poll the sandbox image until
// its first HTTP 200.
func BenchmarkFirst200Runsc(b *testing.B) { benchFirst200(b, "runsc") }
