package dockerbackend_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/pyindex"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// The image runs what agents run: python3 with venv and pip, git, curl,
// bash and GNU coreutils (busybox's ls has no --version).
func TestFullImageTools(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t)
	sid := acquire(t, p, "tools")
	out := exec1(t, p, sid, "python3 --version && python3 -m venv --help >/dev/null && python3 -m pip --version && "+
		"git --version && curl --version | head -n 1 && bash --version | head -n 1 && ls --version | head -n 1")
	for _, want := range []string{"Python 3.", "pip ", "git version", "curl ", "GNU bash", "GNU coreutils"} {
		assert.Contains(t, out, want)
	}
}

// serveWheel builds a one-module wheel and serves it as a PEP 503 index
// on the Docker bridge's gateway, the host address containers reach.
func serveWheel(t *testing.T) *pyindex.Server {
	t.Helper()
	cli := dockerClient(t) // first: it may build the image
	gw, err := dockerbackend.BridgeGateway(ctxT(t), cli)
	require.NoError(t, err)
	name, whl, err := pyindex.Wheel("sage-tiny", "0.1.0", "def answer():\n    return 42\n")
	require.NoError(t, err)
	s, err := pyindex.Serve(gw, map[string][]byte{name: whl})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// execute_python with requirements: pip in the container installs from
// the index named by PIP_INDEX_URL in the provider's environment; later
// calls, with or without requirements, run in the same venv.
func TestPythonRequirementsInContainer(t *testing.T) {
	idx := serveWheel(t)
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) {
		o.Env = map[string]string{"PIP_INDEX_URL": idx.URL, "PIP_TRUSTED_HOST": idx.Host}
	})
	sid := acquire(t, p, "py-reqs")
	h, ok := p.Get(sid)
	require.True(t, ok)
	var steps []string
	opts := sandbox.PythonOptions{Requirements: []string{"sage-tiny==0.1.0"},
		OnSetup: func(s string) func() { steps = append(steps, s); return nil }}
	res, err := h.ExecutePython(ctxT(t), "import sage_tiny, sys\nprint(sage_tiny.answer(), sys.prefix)", opts)
	require.NoError(t, err)
	require.True(t, res.Success, "%+v", res)
	assert.Equal(t, "42 "+aiodriver.VenvPath+"\n", res.Stdout)
	assert.EqualValues(t, 1, idx.Downloads(), "the wheel came from the test's index")
	assert.Equal(t, []string{"installing the Python requirements"}, steps)

	res, err = h.ExecutePython(ctxT(t), "import sage_tiny; print(sage_tiny.answer())", sandbox.PythonOptions{})
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout, "the venv lasts for the sandbox's life: %+v", res)

	// Already installed: pip is satisfied without downloading again.
	res, err = h.ExecutePython(ctxT(t), "print('ok')", opts)
	require.NoError(t, err)
	assert.Equal(t, "ok\n", res.Stdout)
	assert.EqualValues(t, 1, idx.Downloads())

	// A requirement the index does not have is a RequirementsError
	// naming it; an option is refused before anything runs.
	_, err = h.ExecutePython(ctxT(t), "print(1)", sandbox.PythonOptions{Requirements: []string{"no-such-pkg-xyz"}})
	var re *sandbox.RequirementsError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, err.Error(), "no-such-pkg-xyz")
	_, err = h.ExecutePython(ctxT(t), "print(1)", sandbox.PythonOptions{Requirements: []string{"--index-url=http://evil/"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an option")
}

// Without the index in its environment pip cannot reach PyPI (no
// internet, or not the test's wheel): the control that proves the test
// above depends on PIP_INDEX_URL reaching pip.
func TestPythonRequirementsNeedTheIndex(t *testing.T) {
	idx := serveWheel(t)
	f := newFixture(t)
	p := f.provider(t)
	sid := acquire(t, p, "py-noindex")
	h, ok := p.Get(sid)
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), aiodriver.PipTimeout+time.Minute)
	defer cancel()
	_, err := h.ExecutePython(ctx, "import sage_tiny", sandbox.PythonOptions{Requirements: []string{"sage-tiny==0.1.0"},
		ExecOptions: sandbox.ExecOptions{Env: map[string]string{"PIP_INDEX_URL": strings.Replace(idx.URL, "/simple/", "/nothing/", 1),
			"PIP_TRUSTED_HOST": idx.Host}}})
	var re *sandbox.RequirementsError
	require.ErrorAs(t, err, &re)
	assert.Zero(t, idx.Downloads())
}

// `sage image build --minimal` keeps the FROM scratch image (static sage,
// busybox, the host's python3) under its own tag; a provider configured
// with it runs commands and Python.
func TestMinimalImage(t *testing.T) {
	f := newFixture(t)
	bin, err := testenv.SageBinary()
	require.NoError(t, err)
	o := dockerbackend.BuildOptions{Tag: "sage-sandbox:minimal", SageBinary: bin}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		o.Python = "/usr/bin/python3"
	}
	_, err = dockerbackend.BuildImage(ctxT(t), f.cli, o)
	require.NoError(t, err)
	p := f.provider(t, func(po *orchestrator.ProviderOptions) { po.Image = o.Tag })
	sid := acquire(t, p, "minimal")
	out := exec1(t, p, sid, "ls --version 2>&1 | head -n 1; readlink /bin/ls")
	assert.Contains(t, out, "busybox", "busybox, not GNU coreutils")
	if o.Python != "" {
		assert.Equal(t, "7\n", exec1(t, p, sid, "python3 -c 'print(3+4)'"))
	}
}

// The Dockerfile way (where a registry is reachable): FROM a base, with
// the packages installed by apt-get in a RUN step; apt-get reaches the
// Debian mirror from the build container.
func TestFullImageFromDockerfile(t *testing.T) {
	cli := dockerClient(t)
	bin, err := testenv.SageBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The debootstrap base when this machine made one (no registry),
	// else debian:SUITE-slim from the registry. Not sage-sandbox:dev: other
	// test runs may retag it meanwhile.
	base, err := dockerbackend.BaseImage(dockerbackend.RootfsOptions{})
	require.NoError(t, err)
	if _, err := cli.ImageInspect(ctx, base); err != nil {
		base = ""
	}
	tag := "sage-sandbox:test-dockerfile"
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	var progress strings.Builder
	built, err := dockerbackend.BuildFullImage(ctx, cli, dockerbackend.FullOptions{Tag: tag, SageBinary: bin,
		From: dockerbackend.FromDockerfile, Base: base, Rootfs: dockerbackend.RootfsOptions{Packages: []string{"bash"}},
		Progress: &progress, Force: true})
	require.NoError(t, err, progress.String())
	assert.True(t, built)
	assert.Contains(t, progress.String(), "image: build "+tag+" on ")
	hist, err := cli.ImageHistory(ctx, tag)
	require.NoError(t, err)
	var apt bool
	for _, h := range hist {
		apt = apt || strings.Contains(h.CreatedBy, "apt-get install -y --no-install-recommends bash")
	}
	assert.True(t, apt, "a RUN step installed the packages")
	// Up to date: a second build does nothing.
	built, err = dockerbackend.BuildFullImage(ctx, cli, dockerbackend.FullOptions{Tag: tag, SageBinary: bin,
		From: dockerbackend.FromDockerfile, Base: base, Rootfs: dockerbackend.RootfsOptions{Packages: []string{"bash"}}})
	require.NoError(t, err)
	assert.False(t, built)
}
