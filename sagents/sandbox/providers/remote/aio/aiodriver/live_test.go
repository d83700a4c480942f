package aiodriver_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
)

// TestExecLiveOutput: the remote Handle's OnStdout and OnStderr receive
// output while the command runs, not once at its end (#13), every
// exchange validated against the OpenAPI documents.
func TestExecLiveOutput(t *testing.T) {
	_, url := inProcess(t)
	v := spectest.Load(t)
	d, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: url, Transport: v.Transport(t, aioapi.NewTransport())})
	require.NoError(t, err)
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, d)
	defer h.Close(context.Background())

	var mu sync.Mutex
	var out, errs strings.Builder
	var firstOut, firstErr time.Time
	res, err := h.ExecuteCommand(context.Background(), "echo one; echo e1 >&2; sleep 3; echo two", sandbox.ExecOptions{
		OnStdout: func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if firstOut.IsZero() {
				firstOut = time.Now()
			}
			out.Write(b)
		},
		OnStderr: func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if firstErr.IsZero() {
				firstErr = time.Now()
			}
			errs.Write(b)
		},
	})
	end := time.Now()
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, firstOut.IsZero())
	require.False(t, firstErr.IsZero())
	// The command sleeps 3 s after its first lines: they arrived live.
	assert.Greater(t, end.Sub(firstOut), time.Second, "stdout reached OnStdout while the command ran")
	assert.Greater(t, end.Sub(firstErr), time.Second, "stderr reached OnStderr while the command ran")
	assert.Equal(t, "one\ntwo\n", out.String())
	assert.Equal(t, "e1\n", errs.String())
	assert.Equal(t, "one\ntwo\n", res.Stdout)
	assert.Equal(t, "e1\n", res.Stderr)
	assert.True(t, res.Success)

	// A cancelled live command is killed on the server, not left running.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = h.ExecuteCommand(ctx, "sleep 3; touch survived", sandbox.ExecOptions{OnStdout: func([]byte) {}})
	require.Error(t, err)
	res, err = h.ExecuteCommand(context.Background(), "sleep 4.5; test -e survived && echo survived || echo killed",
		sandbox.ExecOptions{Timeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, "killed\n", res.Stdout)
}

// BenchmarkRemoteLiveOutputLatency is the time from a line written in
// the sandbox (its timestamp) to its arrival in OnStdout, through the
// remote Handle, aioserver and the passthrough Handle (ms/line); the goal
// is under 200 ms. BenchmarkPassthroughLiveOutputLatency is the baseline.
func BenchmarkRemoteLiveOutputLatency(b *testing.B) {
	_, url := inProcess(b)
	d, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: url})
	if err != nil {
		b.Fatal(err)
	}
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, d)
	defer h.Close(context.Background())
	benchLatency(b, h)
}

func BenchmarkPassthroughLiveOutputLatency(b *testing.B) {
	h, _ := inProcess(b)
	benchLatency(b, h)
}

func benchLatency(b *testing.B, h *sandbox.Sandbox) {
	var total time.Duration
	var lines int
	var mu sync.Mutex
	for b.Loop() {
		_, err := h.ExecuteCommand(context.Background(), `for i in 1 2 3 4 5; do sleep 0.1; date +%s%N; done`, sandbox.ExecOptions{
			OnStdout: func(p []byte) {
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				for _, f := range strings.Fields(string(p)) {
					if ns, err := strconv.ParseInt(f, 10, 64); err == nil {
						total += now.Sub(time.Unix(0, ns))
						lines++
					}
				}
			},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if lines > 0 {
		b.ReportMetric(float64(total.Milliseconds())/float64(lines), "ms/line")
	}
}
