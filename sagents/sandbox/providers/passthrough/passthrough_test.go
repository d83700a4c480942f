package passthrough_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func newSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	t.Setenv("SAGE_HOME", t.TempDir())
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir()})
	require.NoError(t, err)
	return h
}

func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Options{
		New:           func(t *testing.T) *sandbox.Sandbox { return newSandbox(t) },
		HostProcesses: true,
	})
}

func TestRefusesInServerProcess(t *testing.T) {
	t.Setenv("SAGE_SERVER_PROCESS", "1")
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir()})
	assert.ErrorIs(t, err, passthrough.ErrServerProcess)
}

func TestWorkspaceRequired(t *testing.T) {
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough})
	var ce *sandbox.ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "sandbox.workspace", ce.Field)
}

func TestReadOnlyMount(t *testing.T) {
	t.Setenv("SAGE_HOME", t.TempDir())
	data := t.TempDir()
	require.NoError(t, os.WriteFile(data+"/in.txt", []byte("data"), 0o644))
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir(),
		Mounts: []sandbox.VolumeMount{{HostPath: data, SandboxPath: "/mnt/data", ReadOnly: true}}})
	require.NoError(t, err)
	defer h.Close(context.Background())
	ctx := context.Background()
	got, err := h.ReadFile(ctx, "/mnt/data/in.txt")
	require.NoError(t, err)
	assert.Equal(t, "data", string(got))
	assert.ErrorIs(t, h.WriteFile(ctx, "/mnt/data/in.txt", []byte("x"), sandbox.WriteOptions{}), os.ErrPermission)
	assert.ErrorIs(t, h.DeleteFile(ctx, "/mnt/data/in.txt"), os.ErrPermission)
	assert.ErrorIs(t, h.EnsureDirectory(ctx, "/mnt/data/sub"), os.ErrPermission)
	hp, err := h.ToHostPath("/mnt/data/in.txt")
	require.NoError(t, err)
	assert.Equal(t, data+"/in.txt", hp)
	vp, err := h.ToVirtualPath(data + "/in.txt")
	require.NoError(t, err)
	assert.Equal(t, "/mnt/data/in.txt", vp)
	assert.Equal(t, []sandbox.VolumeMount{{HostPath: data, SandboxPath: "/mnt/data", ReadOnly: true}}, h.VolumeMounts())
}

func TestPythonRequirementsUnsupported(t *testing.T) {
	h := newSandbox(t)
	defer h.Close(context.Background())
	_, err := h.ExecutePython(context.Background(), "print(1)", sandbox.PythonOptions{Requirements: []string{"requests"}})
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
}

func BenchmarkBareExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPassthroughExecTrue(b *testing.B) {
	h := newSandbox(b)
	defer h.Close(context.Background())
	ctx := context.Background()
	for b.Loop() {
		res, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkPassthroughExecTruePaired alternates, in one loop and in
// flipping order, os/exec of /bin/true and passthrough's ExecuteCommand of
// "true", so that the machine's load swings hit both alike; x-baseline is
// the ratio of their medians (make bench's goal: <= 1.5).
func BenchmarkPassthroughExecTruePaired(b *testing.B) {
	h := newSandbox(b)
	defer h.Close(context.Background())
	ctx := context.Background()
	var bare, ours []time.Duration
	timeBare := func() {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
	}
	timeOurs := func() {
		start := time.Now()
		res, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
		ours = append(ours, time.Since(start))
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			timeBare()
			timeOurs()
		} else {
			timeOurs()
			timeBare()
		}
	}
	mb, mo := medianDuration(bare), medianDuration(ours)
	b.ReportMetric(float64(mb), "baseline-median-ns")
	b.ReportMetric(float64(mo), "median-ns")
	b.ReportMetric(float64(mo)/float64(max(mb, 1)), "x-baseline")
}

func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	if n := len(d); n%2 == 0 {
		return (d[n/2-1] + d[n/2]) / 2
	}
	return d[len(d)/2]
}
