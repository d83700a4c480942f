package dockerbackend_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/sage-go/sage/internal/benchpair"
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
	acquire := acquireNew(b, benchFixture(b).provider(b))
	for b.Loop() {
		_, release := acquire()
		b.StopTimer()
		release()
		b.StartTimer()
	}
}

// BenchmarkAcquirePooled acquires a new thread each time from a warm
// pool of one (claim: move the thread's files into the slot, rename the
// container, open, save state). Refilling the pool is not timed.
func BenchmarkAcquirePooled(b *testing.B) {
	p := benchFixture(b).provider(b, pooled(1))
	acquire := acquirePooled(b, p)
	for b.Loop() {
		b.StopTimer()
		waitPool(b, p)
		b.StartTimer()
		_, release := acquire()
		b.StopTimer()
		release()
		b.StartTimer()
	}
}

// acquireNew is an Acquire of a new thread of p: it returns how long
// that took and the thread's release.
func acquireNew(b *testing.B, p *orchestrator.Provider) func() (time.Duration, func()) {
	return acquireAs(b, p, "bench-new-", func(orchestrator.SandboxInfo) {})
}

// acquirePooled is acquireNew from p's warm pool: the release fails b
// when the thread was not a pool sandbox.
func acquirePooled(b *testing.B, p *orchestrator.Provider) func() (time.Duration, func()) {
	return acquireAs(b, p, "bench-pooled-", func(info orchestrator.SandboxInfo) {
		if info.PoolSlot == "" {
			b.Fatal("the acquire did not claim a pool sandbox")
		}
	})
}

func acquireAs(b *testing.B, p *orchestrator.Provider, prefix string, check func(orchestrator.SandboxInfo)) func() (time.Duration, func()) {
	ctx := context.Background()
	i := 0
	return func() (time.Duration, func()) {
		i++
		start := time.Now()
		sid, err := p.Acquire(ctx, prefix+strconv.Itoa(i))
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return d, func() {
			info, _ := p.Info(sid)
			check(info)
			_ = p.Release(ctx, sid)
		}
	}
}

func waitPool(b *testing.B, p *orchestrator.Provider) {
	if err := p.WaitPool(context.Background(), 1); err != nil {
		b.Fatal(err)
	}
}

// timed is step as benchpair.Timed takes it: the time of step alone,
// with prepare (if any) before it and step's cleanup after it untimed.
func timed(prepare func(), step func() (time.Duration, func())) func() time.Duration {
	return func() time.Duration {
		if prepare != nil {
			prepare()
		}
		d, cleanup := step()
		cleanup()
		return d
	}
}

// BenchmarkAcquireNewPaired alternates, in one loop, a plain docker run
// of the image until its first 200 (BenchmarkBaselineDockerRun's) and an
// Acquire of a new thread; x-baseline is the Acquire's median over docker
// run's (make bench's goal: <= 1.2).
func BenchmarkAcquireNewPaired(b *testing.B) {
	f := benchFixture(b)
	benchpair.Timed(b, timed(nil, firstContainer(b, f, "")), timed(nil, acquireNew(b, f.provider(b))))
}

// BenchmarkAcquirePooledPaired alternates an Acquire of a new thread
// (the baseline) and one from a warm pool of one, each of a provider of
// its own; refilling the pool is not timed. x-baseline is the pooled
// claim's median over the new container's (make bench's goal: <= 0.1).
func BenchmarkAcquirePooledPaired(b *testing.B) {
	f := benchFixture(b)
	p := f.provider(b, pooled(1))
	benchpair.Timed(b, timed(nil, acquireNew(b, f.provider(b))), timed(func() { waitPool(b, p) }, acquirePooled(b, p)))
}

// BenchmarkFirst200RunscPaired alternates BenchmarkBaselineDockerRun's
// container under the engine's default runtime (the baseline) and under
// runsc (BenchmarkFirst200Runsc's); x-baseline is gVisor's median over
// the default's.
func BenchmarkFirst200RunscPaired(b *testing.B) {
	f := benchFixture(b)
	checkRuntime(b, f, "runsc")
	benchpair.Timed(b, timed(nil, firstContainer(b, f, "")), timed(nil, firstContainer(b, f, "runsc")))
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
	checkRuntime(b, f, runtime)
	first := firstContainer(b, f, runtime)
	for b.Loop() {
		_, remove := first()
		b.StopTimer()
		remove()
		b.StartTimer()
	}
}

// checkRuntime reports runtime ("" for the default) unavailable when the
// engine has none of that name.
func checkRuntime(b *testing.B, f *fixture, runtime string) {
	if runtime == "" {
		return
	}
	if _, err := dockerbackend.NewChecked(context.Background(), dockerbackend.Options{Client: f.cli, Runtime: runtime}); err != nil {
		unavailable(b, "%v", err)
	}
}

// firstContainer creates, starts and inspects a container of the
// sandbox image under runtime and polls it until its first HTTP 200: it
// returns how long that took and the container's removal.
func firstContainer(b *testing.B, f *fixture, runtime string) func() (time.Duration, func()) {
	ctx := context.Background()
	port := nat.Port("8080/tcp")
	i := 0
	return func() (time.Duration, func()) {
		i++
		start := time.Now()
		resp, err := f.cli.ContainerCreate(ctx, &container.Config{Image: orchestrator.DefaultImage, Env: []string{orchestrator.TokenEnv + "=t"},
			ExposedPorts: nat.PortSet{port: {}}, Labels: map[string]string{dockerbackend.LabelPrefix: f.prefix}},
			&container.HostConfig{Runtime: runtime, PortBindings: nat.PortMap{port: {{HostIP: "127.0.0.1", HostPort: "0"}}}}, nil, nil,
			f.prefix+"-first-"+runtime+strconv.Itoa(i))
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
		return time.Since(start), func() { _ = f.cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true}) }
	}
}
