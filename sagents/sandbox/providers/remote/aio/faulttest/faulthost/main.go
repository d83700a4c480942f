// Command faulthost is the program the aio fault test runs in each of
// its "host" containers (package faulttest). As PID 1 of a host
// (faulthost host) it keeps FAULT_WORKERS worker processes running,
// starting again one that died (the nemesis kills them with SIGKILL).
// Each worker (faulthost worker N) is a process of the orchestrating
// provider against the shared Redis and the Docker Engine (through the
// mounted socket), acquiring, using and releasing sandboxes for the
// shared threads, and appends every command, backend call, lock grant,
// owner lease and lease observation to its history file. faulthost sweep
// is the final sweep, run once every owner is dead.
//
// It is configured by the environment (FAULT_*, see config) and never
// stops by itself.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/faulttest"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/unfenced"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// config is read from the environment.
type config struct {
	host, redis, keyPrefix, prefix, installation, home, network, image, history string
	threads                                                                     []string
	workers, max, pool                                                          int
	ttl                                                                         time.Duration
	unfenced                                                                    bool
}

func readConfig() (config, error) {
	c := config{host: os.Getenv("FAULT_HOST"), redis: os.Getenv("FAULT_REDIS"), keyPrefix: os.Getenv("FAULT_KEY_PREFIX"),
		prefix: os.Getenv("FAULT_PREFIX"), installation: os.Getenv("FAULT_INSTALLATION"), home: os.Getenv("FAULT_HOME"),
		network: os.Getenv("FAULT_NETWORK"), image: os.Getenv("FAULT_IMAGE"), history: os.Getenv("FAULT_HISTORY"),
		threads: strings.Split(os.Getenv("FAULT_THREADS"), ","), unfenced: os.Getenv("FAULT_UNFENCED") == "1"}
	var err error
	num := func(name string, dst *int) {
		if n, e := strconv.Atoi(os.Getenv(name)); e == nil {
			*dst = n
		} else if err == nil {
			err = fmt.Errorf("%s=%q: %v", name, os.Getenv(name), e)
		}
	}
	num("FAULT_WORKERS", &c.workers)
	num("FAULT_MAX", &c.max)
	num("FAULT_POOL", &c.pool)
	ms := 0
	num("FAULT_TTL_MS", &ms)
	c.ttl = time.Duration(ms) * time.Millisecond
	if err == nil && (c.host == "" || c.redis == "" || c.prefix == "" || c.home == "" || c.history == "" || c.ttl <= 0) {
		err = fmt.Errorf("FAULT_HOST, FAULT_REDIS, FAULT_PREFIX, FAULT_HOME, FAULT_HISTORY and FAULT_TTL_MS are required")
	}
	return c, err
}

func main() {
	c, err := readConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulthost:", err)
		os.Exit(2)
	}
	if c.unfenced {
		unfenced.Off.Store(true)
	}
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "host":
		supervise(c)
	case "worker":
		idx, _ := strconv.Atoi(os.Args[2])
		err = work(c, idx)
	case "sweep":
		err = sweep(c)
	default:
		err = fmt.Errorf("usage: faulthost host | worker N | sweep")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulthost:", err)
		os.Exit(1)
	}
}

// supervise keeps c.workers workers running until SIGTERM.
func supervise(c config) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var mu sync.Mutex
	stopping := false
	procs := map[int]*os.Process{}
	for i := range c.workers {
		go func() {
			for {
				cmd := exec.Command(os.Args[0], "worker", strconv.Itoa(i))
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				mu.Lock()
				if stopping {
					mu.Unlock()
					return
				}
				err := cmd.Start()
				if err == nil {
					procs[i] = cmd.Process
				}
				mu.Unlock()
				if err == nil {
					_ = cmd.Wait()
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}
	<-stop
	mu.Lock()
	stopping = true
	for _, p := range procs {
		_ = p.Kill()
	}
	mu.Unlock()
}

// provider builds the worker's provider over recording wrappers.
func provider(c config, rec *faulttest.Recorder, owner string, sweepEvery time.Duration, poolSize int) (*orchestrator.Provider, error) {
	cli, err := dockerbackend.NewClient()
	if err != nil {
		return nil, err
	}
	b, err := dockerbackend.New(dockerbackend.Options{Client: cli, Prefix: c.prefix, Installation: c.installation, Network: c.network})
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("host", c.host, "owner", owner)
	st, err := redisstore.Open(c.redis, redisstore.Options{Prefix: c.keyPrefix, LockTTL: c.ttl, LeaseTTL: c.ttl, Logger: logger})
	if err != nil {
		return nil, err
	}
	return orchestrator.NewProvider(orchestrator.ProviderOptions{
		Backend: &recBackend{b: b, rec: rec, host: c.host}, Store: &recStore{s: st, rec: rec, host: c.host},
		Home: c.home, Image: c.image, ReadyTimeout: 30 * time.Second, PoolSize: poolSize, MaxSandboxes: c.max,
		IdleTimeout: 4 * c.ttl, ReapInterval: c.ttl, SweepInterval: sweepEvery, Owner: owner, Logger: logger})
}

// work is one worker process: two goroutines acquiring, using and
// releasing sandboxes until the process is killed.
func work(c config, idx int) error {
	owner := fmt.Sprintf("%s-w%d-%d", c.host, idx, os.Getpid())
	rec, err := faulttest.NewRecorder(filepath.Join(c.history, owner+".jsonl"))
	if err != nil {
		return err
	}
	poolSize := 0
	if idx == 0 {
		poolSize = c.pool
	}
	p, err := provider(c, rec, owner, 2*c.ttl, poolSize)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				step(c, p, rec)
				time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return nil
}

// step is one random operation: mostly a command in a thread's sandbox,
// sometimes an anonymous sandbox (two commands, then released), sometimes
// a thread's release.
func step(c config, p *orchestrator.Provider, rec *faulttest.Recorder) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	thread := c.threads[rand.IntN(len(c.threads))]
	switch r := rand.Float64(); {
	case r < 0.08:
		sid, err := p.Acquire(ctx, "")
		if err != nil {
			return
		}
		run(ctx, c, p, rec, "", sid)
		run(ctx, c, p, rec, "", sid)
		_ = p.Release(ctx, sid)
	case r < 0.14:
		_ = p.ReleaseThread(ctx, thread)
	default:
		sid, err := p.Acquire(ctx, thread)
		if err != nil {
			return
		}
		run(ctx, c, p, rec, thread, sid)
	}
}

// run runs one command that prints the container's hostname (its id) and
// records it with the owner id it ran under ("" if it changed meanwhile).
func run(ctx context.Context, c config, p *orchestrator.Provider, rec *faulttest.Recorder, thread, sid string) {
	info, _ := p.Info(sid)
	h, ok := p.Get(sid)
	if !ok {
		return
	}
	owner := p.Owner()
	inv := faulttest.Now()
	res, err := h.ExecuteCommand(ctx, "cat /etc/hostname", driver.ExecOptions{Timeout: 10 * time.Second})
	e := faulttest.Event{Kind: faulttest.KindCmd, Host: c.host, Thread: thread, Sandbox: sid, Container: info.ContainerID, Inv: inv, Comp: faulttest.Now()}
	if p.Owner() == owner {
		e.Owner = owner
	}
	if err != nil {
		e.Err = err.Error()
	} else {
		e.OK = res.ExitCode == 0
		e.Answered = strings.TrimSpace(res.Stdout)
	}
	rec.Add(e)
}

// sweep is the final sweep: once now (waiting out the lease TTL for the
// owners it first sees dead), and once more for what that uncovered.
func sweep(c config) error {
	owner := fmt.Sprintf("%s-%d", c.host, os.Getpid())
	rec, err := faulttest.NewRecorder(filepath.Join(c.history, owner+".jsonl"))
	if err != nil {
		return err
	}
	p, err := provider(c, rec, owner, -1, 0)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n := 0
	for range 2 {
		r, err := p.SweepWait(ctx)
		if err != nil {
			return err
		}
		n += len(r.Sandboxes)
		fmt.Printf("swept: owners %v sandboxes %v states %v slots %v counts %v\n", r.DeadOwners, r.Sandboxes, r.States, r.Slots, r.Counts)
	}
	rec.Add(faulttest.Event{Kind: faulttest.KindSweep, Host: c.host, N: n, Inv: faulttest.Now()})
	return p.Shutdown(ctx)
}
