//go:build linux

package local

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/internal/procfs"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newSessionBench is a sandbox with the default isolation and its
// default, the session sandbox, served by cmd/sage-supervisor (what
// make build installs next to bin/sage); closed with b.
func newSessionBench(b *testing.B) *Sandbox { return newSessionBenchIso(b, "", benchSupervisor(b)) }

// benchSupervisor builds cmd/sage-supervisor once per test binary.
func benchSupervisor(b *testing.B) string {
	b.Helper()
	bin, err := testenv.SupervisorBinary()
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// newSessionBenchIso is openSessionBench of isolation iso and supervisor
// program sup, closed with b.
func newSessionBenchIso(b *testing.B, iso, sup string) *Sandbox {
	b.Helper()
	s := openSessionBench(b, iso, sup)
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// openSessionBench opens a sandbox of isolation iso ("": the default)
// with its default, the session sandbox, served by the supervisor program
// sup (SessionOptions.Supervisor), and fails b when that is not a session
// sandbox.
func openSessionBench(b *testing.B, iso, sup string) *Sandbox {
	b.Helper()
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.Isolation.Linux = iso
	s, err := NewWithOptions(context.Background(), cfg, Options{Session: SessionOptions{Supervisor: sup}})
	if err != nil {
		b.Fatal(err)
	}
	if !s.SessionEnabled() {
		s.Close(context.Background())
		b.Fatalf("isolation %q without fresh_per_command should run a session sandbox", iso)
	}
	return s
}

func execTrue(b *testing.B, s *Sandbox) {
	res, err := s.Exec(context.Background(), driver.ExecSpec{Command: "true"})
	if err != nil || !res.Success {
		b.Fatal(err, res)
	}
}

// BenchmarkSessionExecTrue is ExecuteCommand of "true" in a warm session
// sandbox (goal: <= 0.3x BenchmarkBareBwrapTrue).
func BenchmarkSessionExecTrue(b *testing.B) { benchWarmExecTrue(b, newSessionBench(b)) }

// benchWarmExecTrue times "true" in s's session sandbox, started before
// the timing.
func benchWarmExecTrue(b *testing.B, s *Sandbox) {
	execTrue(b, s)
	for b.Loop() {
		execTrue(b, s)
	}
}

// BenchmarkSessionFirstExecTrue is the first command of a new session
// sandbox served by cmd/sage-supervisor: its start and "true" (goal: <=
// 1.3x BenchmarkBareBwrapTrue; BenchmarkSessionFirstExecTruePaired
// measures that ratio steadily). Stopping the session is not timed.
func BenchmarkSessionFirstExecTrue(b *testing.B) { benchFirstExecTrue(b, newSessionBench(b)) }

// BenchmarkSessionFirstExecTrueSelf is BenchmarkSessionFirstExecTrue
// with this program re-executed as the supervisor (no sage-supervisor
// next to it).
func BenchmarkSessionFirstExecTrueSelf(b *testing.B) {
	benchFirstExecTrue(b, newSessionBenchIso(b, "", SupervisorSelf))
}

// BenchmarkSessionFirstExecTruePaired alternates, in one loop, one bare
// bwrap "true" (the argument list of BenchmarkBareBwrapTrue) and one
// first command of a new session sandbox, each timed on its own (the
// session's stop is not), so that the machine's load swings hit both
// alike; the order flips every iteration (benchpair.Timed). It reports
// each side's median and mean and x-baseline, the ratio of the medians
// (goal: <= 1.3), for each supervisor program: cmd/sage-supervisor ("own") and this program
// re-executed ("self").
func BenchmarkSessionFirstExecTruePaired(b *testing.B) {
	for _, sup := range []struct{ name, prog string }{{"own", ""}, {"self", SupervisorSelf}} {
		b.Run(sup.name, func(b *testing.B) {
			prog := sup.prog
			if prog == "" {
				prog = benchSupervisor(b)
			}
			benchFirstExecPaired(b, newSessionBenchIso(b, "", prog), 0)
		})
	}
}

// BenchmarkSessionFirstExecTrueAfterPause is
// BenchmarkSessionFirstExecTruePaired (own supervisor) with a pause of
// 30 ms before each timed run, as between an agent's commands: a cgroup
// move then waits for a whole RCU grace period (the lock's fast state
// lapsed), which back-to-back runs hide. It reports x-baseline too.
func BenchmarkSessionFirstExecTrueAfterPause(b *testing.B) {
	benchFirstExecPaired(b, newSessionBench(b), 30*time.Millisecond)
}

// benchFirstExecPaired alternates bare bwrap and a first command of s,
// sleeping pause before each.
func benchFirstExecPaired(b *testing.B, s *Sandbox, pause time.Duration) {
	bare := benchpair.Measure(bareTrue(b, s))
	first := firstExec(b, s)
	bares, firsts := benchpair.Timed(b, func() time.Duration {
		time.Sleep(pause)
		return bare()
	}, func() time.Duration {
		time.Sleep(pause)
		return first()
	})
	b.ReportMetric(float64(benchpair.Mean(bares)), "baseline-mean-ns")
	b.ReportMetric(float64(benchpair.Mean(firsts)), "mean-ns")
}

// firstExec times "true" as the first command of a new session sandbox
// of s: its start and the command; the session is stopped after the
// timing.
func firstExec(b *testing.B, s *Sandbox) func() time.Duration {
	return func() time.Duration {
		start := time.Now()
		execTrue(b, s)
		d := time.Since(start)
		s.dropSession()
		return d
	}
}

// benchFirstExecTrue times "true" as the first command of a new session
// sandbox of s: its start and the command. Stopping it is not timed.
func benchFirstExecTrue(b *testing.B, s *Sandbox) {
	for b.Loop() {
		execTrue(b, s)
		b.StopTimer()
		s.dropSession()
		b.StartTimer()
	}
}

// BenchmarkSessionFirstExecTruePrestarted is the first command of a new
// session sandbox that SessionOptions.Prestart started in the background
// when the Sandbox opened (not the cold start: that is
// BenchmarkSessionFirstExecTrue). Opening the Sandbox and waiting until
// the prestarted supervisor answers a ping are not timed; prestart-ns is
// that wait, the wall time the background start took after New returned.
func BenchmarkSessionFirstExecTruePrestarted(b *testing.B) {
	var wait time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		s, w := openPrestarted(b)
		wait += w
		n++
		b.StartTimer()
		execTrue(b, s)
		b.StopTimer()
		s.Close(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(float64(wait.Nanoseconds())/float64(max(n, 1)), "prestart-ns")
}

// openPrestarted opens a sandbox whose session sandbox
// SessionOptions.Prestart starts, and waits until the prestarted
// supervisor answers a ping: it returns the sandbox and that wait.
func openPrestarted(b *testing.B) (*Sandbox, time.Duration) {
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	s, err := NewWithOptions(context.Background(), cfg, Options{Session: SessionOptions{Enabled: true, Prestart: true, Supervisor: benchSupervisor(b)}})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for s.SessionPID() == 0 {
		if time.Since(start) > 10*time.Second {
			b.Fatal("the prestarted session sandbox did not come up")
		}
		time.Sleep(50 * time.Microsecond)
	}
	s.sess.mu.Lock()
	l := s.sess.live
	s.sess.mu.Unlock()
	if err := l.ping(); err != nil { // the supervisor serves
		b.Fatal(err)
	}
	return s, time.Since(start)
}

// idleSessions is how many idle session sandboxes
// BenchmarkIdleSessionMemory starts: SAGE_BENCH_IDLE_SESSIONS, else 200.
func idleSessions() int {
	if n, err := strconv.Atoi(os.Getenv("SAGE_BENCH_IDLE_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return 200
}

// BenchmarkIdleSessionMemory (run it with -benchtime 1x) starts 200 idle
// session sandboxes (SAGE_BENCH_IDLE_SESSIONS) and reports the memory
// each costs: bytes/session is the sum of the PSS of every process of
// the sessions (/proc/PID/smaps_rollup) divided by their count (goal <= 4
// MiB, stretch 2 MiB); host-heap-bytes/session is the growth of this
// process's heap (goal <= 64 KiB). With -v it logs the PSS by program.
func BenchmarkIdleSessionMemory(b *testing.B) {
	n := idleSessions()
	var pss, heap float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var pids []int
		open := make([]*Sandbox, 0, n)
		for range n {
			s := openSessionBench(b, "", benchSupervisor(b))
			open = append(open, s)
			execTrue(b, s)
			pids = append(pids, s.SessionPID())
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		total := int64(0)
		byProg := map[string]int64{}
		for _, p := range pids {
			for _, q := range procfs.Tree(p) {
				v := procfs.PSS(q)
				total += v
				comm, _ := os.ReadFile("/proc/" + strconv.Itoa(q) + "/comm")
				byProg[strings.TrimSpace(string(comm))] += v
			}
		}
		pss = float64(total) / float64(n)
		for prog, v := range byProg {
			b.Logf("%d sessions: %s %d bytes/session", n, prog, v/int64(n))
		}
		for _, s := range open {
			s.Close(context.Background())
		}
	}
	b.ReportMetric(pss, "bytes/session")
	b.ReportMetric(heap, "host-heap-bytes/session")
}
