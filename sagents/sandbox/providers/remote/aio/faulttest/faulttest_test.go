package faulttest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
)

// The shape of a run: three hosts of two worker processes each (the
// first with a warm pool of one), four shared threads, leases and locks
// of two seconds, at most eight sandboxes.
const (
	ttl              = 2 * time.Second
	hostCount        = 3
	workersPerHost   = 2
	testMaxSandboxes = 8
	poolSize         = 1
	labelRun         = "sage.faulttest"
	dockerSocket     = "/var/run/docker.sock"
)

var threads = []string{"th-a", "th-b", "th-c", "th-d"}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}

// runDuration is how long the workers run under the nemesis
// (SAGE_FAULTTEST_DURATION to change it, e.g. 5m for a long local run).
func runDuration(t *testing.T, def time.Duration) time.Duration {
	if v := os.Getenv("SAGE_FAULTTEST_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SAGE_FAULTTEST_DURATION")
		return d
	}
	return def
}

// Issue 35: three hosts acquire, use and release sandboxes for shared
// threads against one Redis and the Docker Engine while a nemesis
// partitions hosts from Redis, pauses them longer than a lease, kills
// their processes with SIGKILL and restarts Redis; then every owner is
// killed, the leases expire and one sweep runs. The checker must find
// nothing with fencing on, and must find violations in the control run
// with fencing off (else it, or the faults, prove nothing).
// SAGE_FAULTTEST_RUNS repeats both.
func TestManyHostsWithFaults(t *testing.T) {
	cli := dockerClient(t)
	buildImages(t, cli)
	runs := 1
	if v := os.Getenv("SAGE_FAULTTEST_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SAGE_FAULTTEST_RUNS")
		runs = n
	}
	for i := range runs {
		t.Run(fmt.Sprintf("fenced-%d", i), func(t *testing.T) {
			r := runCluster(t, cli, false, runDuration(t, 60*time.Second))
			assert.Empty(t, r.Violations, "the checker found violations with fencing on:\n%s", r)
			assert.Positive(t, r.CommandsOK, "no command succeeded: the run tested nothing")
		})
		t.Run(fmt.Sprintf("control-%d", i), func(t *testing.T) {
			r := runCluster(t, cli, true, runDuration(t, 45*time.Second))
			assert.NotEmpty(t, r.Violations, "with fencing off the checker found nothing: it, or the faults, prove nothing\n%s", r)
		})
	}
}

func dockerClient(t *testing.T) *client.Client {
	cli, err := dockerbackend.NewClient()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
	}
	if err != nil {
		testenv.Missing(t, "a Docker Engine ("+fmt.Sprint(err)+")", testenv.SetupFix)
	}
	if _, err := os.Stat(dockerSocket); err != nil {
		testenv.Missing(t, "the Docker socket at "+dockerSocket+" (the hosts mount it)", testenv.SetupFix)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// cluster is one run's world, all of it labelled with its run id.
type cluster struct {
	cli                *client.Client
	rid, prefix        string
	dir, home, history string
	redisNet, sbxNet   string
	redis              string // container id
	hosts              []string
	unfenced           bool
	killed             int64 // when every host was dead
	sweeps             int
}

// containerIDs lists the run's sandbox containers (any state).
func (c *cluster) containerIDs(t *testing.T) map[string]bool {
	ctx, cancel := bg()
	defer cancel()
	cs, err := c.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+c.prefix))})
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, ct := range cs {
		ids[ct.ID] = true
	}
	return ids
}

// lateContainers names the run's containers that the engine listed only
// after the final sweep began (not in before): a create it had begun for
// a process since killed, which it may finish many seconds later (it
// stamps the container's creation time when it begins, but lists it only
// once it is done).
func (c *cluster) lateContainers(t *testing.T, before map[string]bool) []string {
	var out []string
	for id := range c.containerIDs(t) {
		if !before[id] {
			out = append(out, id[:12])
		}
	}
	return out
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// runCluster runs the hosts under the nemesis for d, kills them, lets
// the leases expire, runs one sweep, and checks the history and what is
// left.
func runCluster(t *testing.T, cli *client.Client, unfenced bool, d time.Duration) report {
	c := &cluster{cli: cli, rid: "sage-ft-" + randomID(), unfenced: unfenced}
	c.prefix = c.rid
	c.dir = t.TempDir()
	c.home, c.history = filepath.Join(c.dir, "home"), filepath.Join(c.dir, "history")
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	require.NoError(t, os.MkdirAll(c.history, 0o755))
	t.Cleanup(func() { c.removeAll(t) })
	c.start(t)

	rec := func(name string) *Recorder {
		r, err := NewRecorder(filepath.Join(c.history, name+".jsonl"))
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	stopMonitor := c.monitor(rec("monitor"))
	nctx, stopNemesis := context.WithTimeout(context.Background(), d)
	defer stopNemesis()
	faults := c.nemesis(nctx, t, rec("nemesis"))
	<-faults // the nemesis healed its last fault
	ctx, cancel := bg()
	defer cancel()
	for _, h := range c.hosts { // every owner dies
		require.NoError(t, cli.ContainerKill(ctx, h, "KILL"))
	}
	for _, h := range c.hosts {
		waitC, errC := cli.ContainerWait(ctx, h, container.WaitConditionNotRunning)
		select {
		case <-waitC:
		case err := <-errC:
			require.NoError(t, err)
		}
	}
	c.killed = Now()
	c.settle(t)         // what the dead asked of the engine has landed
	time.Sleep(2 * ttl) // their leases expire
	before := c.containerIDs(t)
	c.sweep(t)
	c.settle(t)
	if late := c.lateContainers(t, before); len(late) > 0 {
		// The engine answered a dead process's create after the sweep
		// listed (seconds later, on a loaded machine): no sweep can
		// collect what does not exist yet. A live deployment's next
		// sweep does; here a second one must.
		t.Logf("created after the sweep began, so left to a second sweep: %v", late)
		c.sweep(t)
	}
	stopMonitor()

	events, err := readHistories(c.history)
	require.NoError(t, err)
	r := check(events, testMaxSandboxes)
	r.Violations = append(r.Violations, c.leftovers(t, events)...)
	mode := "fenced"
	if unfenced {
		mode = "control (fencing off)"
	}
	t.Logf("%s run %s, %s under the nemesis:\n%s", mode, c.rid, d, r)
	_ = os.WriteFile(filepath.Join(c.dir, "report.txt"), []byte(r.String()), 0o644)
	if keep := os.Getenv("SAGE_FAULTTEST_KEEP"); keep != "" && (len(r.Violations) > 0) != unfenced {
		dst := filepath.Join(keep, c.rid)
		if err := os.CopyFS(dst, os.DirFS(c.history)); err == nil {
			_ = os.WriteFile(filepath.Join(dst, "report.txt"), []byte(r.String()), 0o644)
			t.Logf("history kept in %s", dst)
		}
	}
	return r
}

func (c *cluster) labels() map[string]string { return map[string]string{labelRun: c.rid} }

// sandboxNetwork is where the hosts reach the sandboxes: one network for
// every run of this test, made when missing and never removed. Under the
// nemesis a sandbox is sometimes removed while the engine still starts
// it (a killed or stale holder's start racing the new holder's remove),
// and Docker 20.10 then keeps a stale endpoint count on the network,
// which refuses removal until the daemon restarts: a network per run
// would leak once in a while.
const sandboxNetwork = "sage-faulttest-sandboxes"

func ensureSandboxNetwork(t *testing.T, cli *client.Client) {
	ctx, cancel := bg()
	defer cancel()
	if _, err := cli.NetworkInspect(ctx, sandboxNetwork, network.InspectOptions{}); err == nil {
		return
	}
	_, err := cli.NetworkCreate(ctx, sandboxNetwork, network.CreateOptions{Driver: "bridge", Labels: map[string]string{labelRun: "shared"}})
	if err != nil && !cerrdefs.IsConflict(err) {
		require.NoError(t, err)
	}
}

// start makes the networks, Redis and the hosts.
func (c *cluster) start(t *testing.T) {
	ctx, cancel := bg()
	defer cancel()
	c.redisNet, c.sbxNet = c.rid+"-redis", sandboxNetwork
	_, err := c.cli.NetworkCreate(ctx, c.redisNet, network.CreateOptions{Driver: "bridge", Labels: c.labels()})
	require.NoError(t, err)
	ensureSandboxNetwork(t, c.cli)
	resp, err := c.cli.ContainerCreate(ctx, &container.Config{Image: redisImage, Labels: c.labels()},
		&container.HostConfig{NetworkMode: container.NetworkMode(c.redisNet)}, nil, nil, c.rid+"-redis")
	require.NoError(t, err)
	c.redis = resp.ID
	require.NoError(t, c.cli.ContainerStart(ctx, c.redis, container.StartOptions{}))
	for i := range hostCount {
		c.hosts = append(c.hosts, c.runHost(t, fmt.Sprintf("h%d", i), []string{"/faulthost", "host"}, c.sbxNet))
	}
}

// runHost starts a container of the host image on the Redis network,
// also attached to extra, with the engine's socket and the run's
// directory (at the same path: sandboxes bind the threads' files from
// it).
func (c *cluster) runHost(t *testing.T, name string, entrypoint []string, extra string) string {
	ctx, cancel := bg()
	defer cancel()
	fenced := "0"
	if c.unfenced {
		fenced = "1"
	}
	env := []string{"FAULT_HOST=" + name, "FAULT_REDIS=redis://" + c.rid + "-redis:6379/0", "FAULT_KEY_PREFIX=" + c.keyPrefix(),
		"FAULT_PREFIX=" + c.prefix, "FAULT_INSTALLATION=" + c.rid, "FAULT_HOME=" + c.home, "FAULT_NETWORK=" + c.sbxNet,
		"FAULT_IMAGE=" + sandboxImage, "FAULT_HISTORY=" + c.history, "FAULT_THREADS=" + strings.Join(threads, ","),
		"FAULT_WORKERS=" + strconv.Itoa(workersPerHost), "FAULT_MAX=" + strconv.Itoa(testMaxSandboxes), "FAULT_POOL=" + strconv.Itoa(poolSize),
		"FAULT_TTL_MS=" + strconv.FormatInt(ttl.Milliseconds(), 10), "FAULT_UNFENCED=" + fenced}
	resp, err := c.cli.ContainerCreate(ctx, &container.Config{Image: hostImage, Entrypoint: entrypoint, Env: env, Labels: c.labels()},
		&container.HostConfig{NetworkMode: container.NetworkMode(c.redisNet),
			Binds: []string{dockerSocket + ":" + dockerSocket, c.dir + ":" + c.dir}}, nil, nil, c.rid+"-"+name)
	require.NoError(t, err)
	require.NoError(t, c.cli.NetworkConnect(ctx, extra, resp.ID, nil))
	require.NoError(t, c.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}))
	return resp.ID
}

func (c *cluster) keyPrefix() string { return "sage:faulttest:" + c.rid + ":" }

// monitor samples, every 200 ms, how many of the run's sandbox
// containers run; the returned func stops it.
func (c *cluster) monitor(rec *Recorder) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f := filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+c.prefix))
		for ctx.Err() == nil {
			at := Now()
			if cs, err := c.cli.ContainerList(ctx, container.ListOptions{Filters: f}); err == nil {
				e := Event{Kind: kindSample, N: len(cs), Inv: at}
				for _, ct := range cs {
					e.Names = append(e.Names, strings.TrimPrefix(ct.Names[0], "/"+c.prefix+"-"))
				}
				rec.Add(e)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// nemesis injects one fault at a time, at random points, until ctx ends;
// the channel closes once the last fault is healed.
func (c *cluster) nemesis(ctx context.Context, t *testing.T, rec *Recorder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var order []int // every kind of fault, in a new random order each round
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(1000+rand.IntN(1500)) * time.Millisecond):
			}
			if len(order) == 0 {
				order = rand.Perm(4)
			}
			kind := order[0]
			order = order[1:]
			hi := rand.IntN(len(c.hosts))
			host := c.hosts[hi]
			e := Event{Kind: kindFault, Host: fmt.Sprintf("h%d", hi), Inv: Now()}
			long := time.Duration(float64(ttl) * (1.5 + rand.Float64()))
			actx, cancel := bg()
			var err error
			switch kind {
			case 0:
				e.Op = "partition"
				if err = c.cli.NetworkDisconnect(actx, c.redisNet, host, true); err == nil {
					time.Sleep(long)
					err = c.cli.NetworkConnect(actx, c.redisNet, host, nil)
				}
			case 1:
				e.Op = "pause"
				if err = c.cli.ContainerPause(actx, host); err == nil {
					time.Sleep(long)
					err = c.cli.ContainerUnpause(actx, host)
				}
			case 2:
				e.Op = "kill"
				err = c.killWorker(actx, host)
			case 3:
				e.Op, e.Host = "restart", "redis"
				if err = c.cli.ContainerKill(actx, c.redis, "KILL"); err == nil {
					err = c.cli.ContainerStart(actx, c.redis, container.StartOptions{})
				}
			}
			cancel()
			e.Comp, e.OK = Now(), err == nil
			if err != nil {
				e.Err = err.Error()
				t.Logf("nemesis: %s %s: %v", e.Op, e.Host, err)
			}
			rec.Add(e)
		}
	}()
	return done
}

// killWorker sends SIGKILL to one worker process of a host (the
// supervisor, PID 1 there, starts it again).
func (c *cluster) killWorker(ctx context.Context, host string) error {
	top, err := c.cli.ContainerTop(ctx, host, nil)
	if err != nil {
		return err
	}
	pidCol, cmdCol := -1, -1
	for i, title := range top.Titles {
		switch title {
		case "PID":
			pidCol = i
		case "CMD", "COMMAND":
			cmdCol = i
		}
	}
	var pids []int
	for _, p := range top.Processes {
		if pidCol >= 0 && cmdCol >= 0 && strings.Contains(p[cmdCol], "worker") {
			if pid, err := strconv.Atoi(p[pidCol]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) == 0 {
		return fmt.Errorf("no worker process in %s", host)
	}
	return syscall.Kill(pids[rand.IntN(len(pids))], syscall.SIGKILL)
}

// sweep runs the final sweep in its own container and waits for it.
func (c *cluster) sweep(t *testing.T) {
	c.sweeps++
	id := c.runHost(t, fmt.Sprintf("sweeper%d", c.sweeps), []string{"/faulthost", "sweep"}, c.sbxNet)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitC, errC := c.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		require.Zero(t, w.StatusCode, "the final sweep failed:\n%s", readLogs(c.cli, id))
	case err := <-errC:
		t.Fatalf("waiting for the final sweep: %v\n%s", err, readLogs(c.cli, id))
	}
	t.Logf("final sweep:\n%s", readLogs(c.cli, id))
}

func containerLogOptions() container.LogsOptions {
	return container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "200"}
}

// leftovers lists what the sweep left of the dead owners: containers,
// Redis keys (records, locks, leases, counts), pool slot directories,
// threads' files still in a slot, and the sandboxes' cgroups.
func (c *cluster) leftovers(t *testing.T, events []Event) []violation {
	ctx, cancel := bg()
	defer cancel()
	var out []violation
	left := func(format string, args ...any) {
		out = append(out, violation{Rule: ruleLeftover, Detail: fmt.Sprintf(format, args...)})
	}
	cs, err := c.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+c.prefix))})
	require.NoError(t, err)
	for _, ct := range cs {
		id := ct.Labels[dockerbackend.LabelID]
		made := "no create of it in the history"
		for _, e := range events {
			if e.Kind == KindOp && e.Op == "create-invoked" && e.Sandbox == id {
				made = fmt.Sprintf("created by %s, asked %s before every host was dead, never answered", e.Owner,
					time.Duration(c.killed-e.Inv).Round(time.Millisecond))
			}
			if e.Kind == KindOp && e.Op == "create" && e.Sandbox == id {
				made = fmt.Sprintf("created by %s, asked %s before every host was dead, answered %s before (ok %v: %s)",
					e.Owner, time.Duration(c.killed-e.Inv).Round(time.Millisecond), time.Duration(c.killed-e.Comp).Round(time.Millisecond), e.OK, e.Err)
			}
		}
		left("container %s (%s, owner %s) is left; %s", ct.Names[0], ct.State, ct.Labels[dockerbackend.LabelOwner], made)
	}

	ins, err := c.cli.ContainerInspect(ctx, c.redis)
	require.NoError(t, err)
	ip := ins.NetworkSettings.Networks[c.redisNet].IPAddress
	rdb := redis.NewClient(&redis.Options{Addr: ip + ":6379"})
	defer rdb.Close()
	var keys []string
	// The fencing counters outlive their last lock by four TTLs; give
	// every key that expires the time to.
	deadline := time.Now().Add(6 * ttl)
	for {
		keys, err = rdb.Keys(ctx, c.keyPrefix()+"*").Result()
		require.NoError(t, err, "the test reads Redis at %s", ip)
		if len(keys) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, k := range keys {
		left("Redis key %s is left", strings.TrimPrefix(k, c.keyPrefix()))
	}

	slots, _ := os.ReadDir(filepath.Join(c.home, "pool"))
	for _, s := range slots {
		left("pool slot directory %s is left", s.Name())
	}
	for _, th := range threads {
		if fi, err := os.Lstat(filepath.Join(c.home, "threads", th, "user-data")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			left("thread %s's files are still in a pool slot", th)
		}
	}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Kind == KindOp && e.Op == "create" && e.OK && len(e.Container) == 64 && !seen[e.Container] {
			seen[e.Container] = true
			for _, h := range []string{"memory", "pids", "cpu", "cpuacct"} {
				for _, p := range []string{filepath.Join("/sys/fs/cgroup", h, "docker", e.Container),
					filepath.Join("/sys/fs/cgroup", h, "system.slice", "docker-"+e.Container+".scope")} {
					if _, err := os.Stat(p); err == nil {
						left("cgroup %s of sandbox %s is left", p, e.Sandbox)
					}
				}
			}
		}
	}
	return out
}

// settle waits (two minutes at most) until the run's containers and their
// states have not changed for five seconds: a killed process's create or
// start already sent to the engine lands after its death, and removing a
// container while the engine still starts it can leave a stale endpoint
// on its network (Docker 20.10).
func (c *cluster) settle(t *testing.T) {
	ctx, cancel := bg()
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+c.prefix))
	last, stable := "", 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && stable < 10; time.Sleep(500 * time.Millisecond) {
		cs, err := c.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return
		}
		var sig []string
		for _, ct := range cs {
			sig = append(sig, ct.ID+ct.State)
		}
		slices.Sort(sig)
		if now := strings.Join(sig, ","); now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
	if stable < 10 {
		t.Logf("the engine did not settle within two minutes")
	}
}

// removeAll removes what this run made: its containers (hosts, Redis,
// the sweeper, every sandbox with its prefix) and its networks.
func (c *cluster) removeAll(t *testing.T) {
	ctx, cancel := bg()
	defer cancel()
	for _, h := range c.hosts { // nothing asks the engine for more
		_ = c.cli.ContainerUnpause(ctx, h)
		_ = c.cli.ContainerKill(ctx, h, "KILL")
	}
	c.settle(t)
	for _, f := range []filters.Args{
		filters.NewArgs(filters.Arg("label", labelRun+"="+c.rid)),
		filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+c.prefix)),
	} {
		cs, err := c.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		for _, ct := range cs {
			_ = c.cli.ContainerUnpause(ctx, ct.ID)
			if err := c.cli.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	for _, n := range []string{c.redisNet} {
		if n == "" {
			continue
		}
		var err error
		for range 60 { // a removed container's endpoint goes a moment after it
			if err = c.cli.NetworkRemove(ctx, n); err == nil || cerrdefs.IsNotFound(err) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	}
}
