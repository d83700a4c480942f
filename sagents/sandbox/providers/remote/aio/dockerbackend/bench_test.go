package dockerbackend_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Run: go test -run '^$' -bench . -benchtime 5x ./sagents/sandbox/providers/remote/aio/dockerbackend/
// (make bench-aio). Baseline and candidates run in one process.

func benchFixture(b *testing.B) *fixture {
	cli := dockerClient(b)
	f := &fixture{cli: cli, prefix: "sagebench-" + strconv.FormatInt(time.Now().UnixNano()&0xffffff, 16), home: b.TempDir()}
	b.Cleanup(func() { f.removeAll(b) })
	return f
}

// BenchmarkBaselineDockerRun is `docker run -d -p 127.0.0.1::8080` of the
// same image through the Engine API (create, start, inspect the port),
// then GET /v1/sandbox every 10 ms until the first 200.
func BenchmarkBaselineDockerRun(b *testing.B) { benchFirst200(b, "") }

// BenchmarkAcquireNew acquires a new thread each time (create, wait
// ready, open, save state).
func BenchmarkAcquireNew(b *testing.B) {
	f := benchFixture(b)
	p := f.provider(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		sid, err := p.Acquire(ctx, "bench-new-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = p.Release(ctx, sid)
		b.StartTimer()
	}
}

// BenchmarkAcquirePooled acquires a new thread each time from a warm
// pool of one (claim: move the thread's files into the slot, rename the
// container, open, save state). Refilling the pool is not timed.
func BenchmarkAcquirePooled(b *testing.B) {
	f := benchFixture(b)
	p := f.provider(b, pooled(1))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := p.WaitPool(ctx, 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		sid, err := p.Acquire(ctx, "bench-pooled-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if info, _ := p.Info(sid); info.PoolSlot == "" {
			b.Fatal("the acquire did not claim a pool sandbox")
		}
		_ = p.Release(ctx, sid)
		b.StartTimer()
	}
}

// BenchmarkAcquireCached acquires a thread this process already holds.
func BenchmarkAcquireCached(b *testing.B) {
	f := benchFixture(b)
	p := f.provider(b)
	ctx := context.Background()
	if _, err := p.Acquire(ctx, "bench-cached"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := p.Acquire(ctx, "bench-cached"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireRecovered acquires, in a fresh provider each time (a
// restarted process), a thread whose sandbox runs: load state, Discover,
// wait ready, open, re-save.
func BenchmarkAcquireRecovered(b *testing.B) {
	f := benchFixture(b)
	ctx := context.Background()
	keep := func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep }
	if _, err := f.provider(b, keep).Acquire(ctx, "bench-recover"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		p := f.provider(b, keep)
		b.StartTimer()
		if _, err := p.Acquire(ctx, "bench-recover"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = p.Shutdown(ctx)
		b.StartTimer()
	}
}

// benchFirst200 creates, starts and inspects a container of the sandbox
// image under runtime ("" for the engine's default), then polls it until
// its first HTTP 200.
func benchFirst200(b *testing.B, runtime string) {
	f := benchFixture(b)
	if runtime != "" {
		if _, err := dockerbackend.NewChecked(context.Background(), dockerbackend.Options{Client: f.cli, Runtime: runtime}); err != nil {
			unavailable(b, "%v", err)
		}
	}
	ctx := context.Background()
	port := nat.Port("8080/tcp")
	for i := 0; b.Loop(); i++ {
		resp, err := f.cli.ContainerCreate(ctx, &container.Config{Image: orchestrator.DefaultImage, Env: []string{orchestrator.TokenEnv + "=t"},
			ExposedPorts: nat.PortSet{port: {}}, Labels: map[string]string{dockerbackend.LabelPrefix: f.prefix}},
			&container.HostConfig{Runtime: runtime, PortBindings: nat.PortMap{port: {{HostIP: "127.0.0.1", HostPort: "0"}}}}, nil, nil,
			f.prefix+"-first-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := f.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
		ins, err := f.cli.ContainerInspect(ctx, resp.ID)
		if err != nil {
			b.Fatal(err)
		}
		url := "http://127.0.0.1:" + ins.NetworkSettings.Ports[port][0].HostPort
		if err := aioapi.WaitReady(ctx, url, aioapi.ReadyOptions{Token: "t", First: 10 * time.Millisecond, Max: 10 * time.Millisecond}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = f.cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true})
		b.StartTimer()
	}
}
