//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// openCheckpointBench opens a sandbox with checkpoints on over ws (its
// session sandbox served by cmd/sage-supervisor), closed with b.
func openCheckpointBench(b *testing.B, ws, sup string) *Sandbox {
	return openCheckpointBenchPool(b, ws, sup, 0)
}

// openCheckpointBenchPool is openCheckpointBench with pool as
// Options.ForkPool.
func openCheckpointBenchPool(b *testing.B, ws, sup string, pool int) *Sandbox {
	b.Helper()
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.Checkpoints = true
	s, err := NewWithOptions(context.Background(), cfg, Options{Session: SessionOptions{Enabled: true, Supervisor: sup}, ForkPool: pool})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func timed(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

func benchExec(b *testing.B, s *Sandbox, cmd string) {
	res, err := s.Exec(context.Background(), driver.ExecSpec{Command: cmd})
	if err != nil || !res.Success {
		b.Fatal(cmd, err, res)
	}
}

// BenchmarkCheckpointPaired measures, alternating in one loop against a
// warm `true` in the same session sandbox: a checkpoint after a one-file
// change (checkpoint/exec, goal <= 1.0), a rollback to it after another
// change (rollback/exec, goal <= 1.0), a fork with its first `true`
// (standing on the checkpoint's layers): taking a pre-started sandbox of
// the pool, refilled between iterations as between tool calls (fork/exec,
// goal <= 2.0), and with none (forkcold, against a new sandbox's first
// `true`: forkcold/first, goal <= 1.3), and a checkpoint of a 50,000-file workspace
// against a 1,000-file one (ckpt50k/ckpt1k, goal <= 1.5), with `cp -a` of
// each workspace for scale (the first iterations only). The medians are
// reported in ms too.
func BenchmarkCheckpointPaired(b *testing.B) {
	testenv.Command(b, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	sup := benchSupervisor(b)
	ctx := context.Background()
	s := openCheckpointBenchPool(b, sandboxtest.TempDir(b), sup, 1)
	benchExec(b, s, "echo 0 > /workspace/f")
	ws1k, ws50k := sandboxtest.TempDir(b), sandboxtest.TempDir(b)
	testenv.MakeEntries(b, ws1k, 1000)
	testenv.MakeEntries(b, ws50k, 50000)
	s1k, s50k := openCheckpointBench(b, ws1k, sup), openCheckpointBench(b, ws50k, sup)
	benchExec(b, s1k, "true")
	benchExec(b, s50k, "true")
	var tExec, tCkpt, tRb, tFork, tCold, tFirst, t1k, t50k, cp1k, cp50k []time.Duration
	forks := sandboxtest.TempDir(b)
	forkCfg := func(dir string) driver.Config {
		c := s.forks.cfg
		c.Workspace, c.SandboxID, c.RuntimeDir = dir, "", ""
		return c
	}
	waitPool(b, s, 1)
	i := 0
	for b.Loop() {
		i++
		tExec = append(tExec, timed(func() { benchExec(b, s, "true") }))
		benchExec(b, s, "echo "+strconv.Itoa(i)+" > /workspace/f")
		var cp sandbox.Checkpoint
		tCkpt = append(tCkpt, timed(func() {
			var err error
			if cp, err = s.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
		}))
		benchExec(b, s, "echo changed > /workspace/f; echo more > /workspace/g")
		tRb = append(tRb, timed(func() {
			if err := s.Rollback(ctx, cp.ID); err != nil {
				b.Fatal(err)
			}
		}))
		if i <= 20 { // a fork is a new sandbox: its cost, not a loop of them
			var f *Sandbox
			for _, c := range []struct {
				pooled bool
				out    *[]time.Duration
			}{{true, &tFork}, {false, &tCold}} {
				dir := filepath.Join(forks, "f"+strconv.Itoa(i)+strconv.FormatBool(c.pooled))
				*c.out = append(*c.out, timed(func() {
					var err error
					if f, err = s.fork(ctx, cp.ID, forkCfg(dir), c.pooled); err != nil {
						b.Fatal(err)
					}
					benchExec(b, f, "true")
				}))
				f.Close(ctx)
				waitPool(b, s, 1) // refilled, as between tool calls
			}
			empty := filepath.Join(forks, "e"+strconv.Itoa(i))
			os.Mkdir(empty, 0o755)
			tFirst = append(tFirst, timed(func() {
				f = openCheckpointBench(b, empty, sup)
				benchExec(b, f, "true")
			}))
			f.Close(ctx)
		}
		benchExec(b, s1k, "echo "+strconv.Itoa(i)+" > /workspace/f1000000")
		benchExec(b, s50k, "echo "+strconv.Itoa(i)+" > /workspace/f1000000")
		sizes := []struct {
			s   *Sandbox
			out *[]time.Duration
		}{{s1k, &t1k}, {s50k, &t50k}}
		if i%2 == 0 {
			// The order alternates: a checkpoint's background work (the
			// overlays built ahead) lands on the one after it, whichever
			// size that is, not always on the 50k one.
			sizes[0], sizes[1] = sizes[1], sizes[0]
		}
		for _, c := range sizes {
			*c.out = append(*c.out, timed(func() {
				if _, err := c.s.Checkpoint(ctx); err != nil {
					b.Fatal(err)
				}
			}))
		}
		if i <= 3 {
			for _, c := range []struct {
				ws  string
				out *[]time.Duration
			}{{ws1k, &cp1k}, {ws50k, &cp50k}} {
				dst := filepath.Join(forks, "cp"+strconv.Itoa(len(*c.out))+filepath.Base(c.ws))
				*c.out = append(*c.out, timed(func() {
					if out, err := exec.Command("cp", "-a", c.ws, dst).CombinedOutput(); err != nil {
						b.Fatal(err, string(out))
					}
				}))
				os.RemoveAll(dst)
			}
		}
	}
	ms := func(d []time.Duration) float64 { return float64(benchpair.Median(d).Nanoseconds()) / 1e6 }
	ratio := func(a, c []time.Duration) float64 {
		return float64(benchpair.Median(a)) / float64(max(benchpair.Median(c), 1))
	}
	b.ReportMetric(ratio(tCkpt, tExec), "checkpoint/exec")
	b.ReportMetric(ratio(tRb, tExec), "rollback/exec")
	b.ReportMetric(ratio(tFork, tExec), "fork/exec")
	b.ReportMetric(ratio(tCold, tFirst), "forkcold/first")
	b.ReportMetric(ratio(t50k, t1k), "ckpt50k/ckpt1k")
	b.ReportMetric(ms(tExec), "exec-ms")
	b.ReportMetric(ms(tCkpt), "checkpoint-ms")
	b.ReportMetric(ms(tRb), "rollback-ms")
	b.ReportMetric(ms(tFork), "fork-ms")
	b.ReportMetric(ms(tCold), "forkcold-ms")
	b.ReportMetric(ms(tFirst), "first-ms")
	b.ReportMetric(ms(t1k), "ckpt1k-ms")
	b.ReportMetric(ms(t50k), "ckpt50k-ms")
	b.ReportMetric(ms(cp1k), "cp-a-1k-ms")
	b.ReportMetric(ms(cp50k), "cp-a-50k-ms")
}

// BenchmarkGvisorCheckpointPaired is BenchmarkCheckpointPaired's
// checkpoint and rollback for a gVisor session sandbox (runsc checkpoint
// and restore of the whole sandbox, a copy of the workspace), alternating
// in one loop against a warm `true` in the same session: checkpoint/exec
// and rollback/exec, and their medians in ms. The session runs a
// background loop (its state is in every image) and /tmp holds a file.
func BenchmarkGvisorCheckpointPaired(b *testing.B) {
	requireGvisorBench(b)
	ctx := context.Background()
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.Checkpoints = true
	cfg.Local.Isolation.Linux = sandbox.IsolationGvisor
	s, err := NewWithOptions(ctx, cfg, Options{Session: SessionOptions{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	benchExec(b, s, "echo 0 > /workspace/f; echo t > /tmp/t; "+
		"sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done' </dev/null >/dev/null 2>&1 &")
	var tExec, tCkpt, tRb []time.Duration
	i := 0
	for b.Loop() {
		i++
		tExec = append(tExec, timed(func() { benchExec(b, s, "true") }))
		benchExec(b, s, "echo "+strconv.Itoa(i)+" > /workspace/f")
		var cp driver.Checkpoint
		tCkpt = append(tCkpt, timed(func() {
			var err error
			if cp, err = s.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
		}))
		benchExec(b, s, "echo changed > /workspace/f; echo more > /workspace/g")
		tRb = append(tRb, timed(func() {
			if err := s.Rollback(ctx, cp.ID); err != nil {
				b.Fatal(err)
			}
		}))
	}
	ms := func(d []time.Duration) float64 { return float64(benchpair.Median(d).Nanoseconds()) / 1e6 }
	ratio := func(a, c []time.Duration) float64 {
		return float64(benchpair.Median(a)) / float64(max(benchpair.Median(c), 1))
	}
	b.ReportMetric(ratio(tCkpt, tExec), "checkpoint/exec")
	b.ReportMetric(ratio(tRb, tExec), "rollback/exec")
	b.ReportMetric(ms(tExec), "exec-ms")
	b.ReportMetric(ms(tCkpt), "checkpoint-ms")
	b.ReportMetric(ms(tRb), "rollback-ms")
}
