package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/pyindex"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// `sage python --mode remote` end to end: the aio provider starts a
// container of sage-sandbox:dev, pip inside it installs a wheel from a
// PEP 503 index this test serves on the Docker bridge's gateway (named
// by PIP_INDEX_URL in sage's environment), and the code imports it. On
// the busybox image this failed with "python3: not found", and
// requirements were refused as unsupported.
func TestPythonRemoteWithRequirements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := dockerWithImage(t, ctx)
	gw, err := dockerbackend.BridgeGateway(ctx, cli)
	require.NoError(t, err)
	name, whl, err := pyindex.Wheel("sage-tiny", "0.1.0", "def answer():\n    return 42\n")
	require.NoError(t, err)
	idx, err := pyindex.Serve(gw, map[string][]byte{name: whl})
	require.NoError(t, err)
	defer idx.Close()

	home := sandboxtest.TempDir(t)
	t.Setenv("SAGE_AIO_CONTAINER_PREFIX", fmt.Sprintf("sagetest-py-%d", os.Getpid()))
	t.Setenv("PIP_INDEX_URL", idx.URL)
	t.Setenv("PIP_TRUSTED_HOST", gw)
	t.Cleanup(func() {
		if r := sage(t, home, "", "sandbox", "rm", "--all"); r.code != 0 {
			t.Errorf("sandbox rm --all: %s", r.stderr)
		}
	})
	remote := []string{"python", "--mode", "remote", "--remote-provider", "aio", "--session", "py-remote"}
	r := sage(t, home, "", append(remote, "-c", "import shutil, sys; print(sys.version_info[0], shutil.which('git') is not None)")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "3 True\n", r.stdout)

	r = sage(t, home, "", append(remote, "--requirements", "sage-tiny==0.1.0", "-c", "import sage_tiny; print(sage_tiny.answer())")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "42\n", r.stdout)
	assert.EqualValues(t, 1, idx.Downloads())
}

// dockerWithImage returns a client of the Docker Engine, failing (or
// skipping, where allowed) without one or without the sandbox image.
func dockerWithImage(t *testing.T, ctx context.Context) *client.Client {
	t.Helper()
	cli, err := dockerbackend.NewClient()
	if err == nil {
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		testenv.Missing(t, "a Docker Engine", testenv.SetupFix)
	}
	t.Cleanup(func() { cli.Close() })
	if _, err := cli.ImageInspect(ctx, orchestrator.DefaultImage); err != nil {
		testenv.Missing(t, "the image "+orchestrator.DefaultImage, "make image")
	}
	return cli
}
