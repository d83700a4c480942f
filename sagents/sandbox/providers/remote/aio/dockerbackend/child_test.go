package dockerbackend_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// runChild is the body of a re-executed test binary.
func runChild(mode string) int {
	cli, err := dockerbackend.NewClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b, err := dockerbackend.New(dockerbackend.Options{Client: cli, Prefix: os.Getenv(prefixEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var store orchestrator.StateStore = orchestrator.NewFileStore(os.Getenv(homeEnv))
	if u := os.Getenv(storeEnv); u != "" {
		s, err := redisstore.Open(u, redisstore.Options{Prefix: "sage:test:" + os.Getenv(prefixEnv) + ":"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		store = s
	}
	thread := os.Getenv(threadEnv)
	switch mode {
	case "acquire":
		return childAcquire(b, store, thread)
	case "pool":
		return childPool(b, store)
	case "hold":
		return childHold(b, store, thread)
	case "hold-lock":
		if _, err := store.Lock(context.Background(), thread); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
	case "mid-create":
		p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: stallAfterCreate{b}, Store: store, Home: os.Getenv(homeEnv)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		_, err = p.Acquire(context.Background(), thread)
		fmt.Fprintln(os.Stderr, "mid-create: acquire returned", err)
		return 2
	}
	return 2
}

// childAcquire: 64 goroutines acquire the thread; prints the sandbox id
// once if all agree; leaves the sandbox running.
func childAcquire(b orchestrator.Backend, store orchestrator.StateStore, thread string) int {
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Store: store, Home: os.Getenv(homeEnv),
		ShutdownPolicy: orchestrator.PolicyKeep, ReadyTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer p.Shutdown(context.Background())
	ids := make([]string, 64)
	errs := make([]error, 64)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ids[i], errs[i] = p.Acquire(ctx, thread)
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			fmt.Fprintln(os.Stderr, "child acquire:", ids[i], errs[i])
			return 1
		}
	}
	fmt.Println(ids[0])
	return 0
}

// stallAfterCreate creates the container, then says so and hangs, so the
// test can kill -9 the process mid-create.
type stallAfterCreate struct{ orchestrator.Backend }

func (s stallAfterCreate) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	info, err := s.Backend.Create(ctx, req)
	fmt.Println("created", err)
	time.Sleep(time.Hour)
	return info, err
}

// childHold holds, with the default (release) policy and a pool of 1,
// the thread's sandbox and an anonymous one, says "held" and waits to be
// killed.
func childHold(b orchestrator.Backend, store orchestrator.StateStore, thread string) int {
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Store: store, Home: os.Getenv(homeEnv),
		ReadyTimeout: 2 * time.Minute, PoolSize: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := p.Acquire(ctx, thread); err != nil {
		fmt.Fprintln(os.Stderr, "child hold:", err)
		return 1
	}
	if _, err := p.Acquire(ctx, ""); err != nil {
		fmt.Fprintln(os.Stderr, "child hold:", err)
		return 1
	}
	if err := p.WaitPool(ctx, 1); err != nil {
		fmt.Fprintln(os.Stderr, "child hold:", err)
		return 1
	}
	fmt.Println("held")
	time.Sleep(time.Hour)
	return 0
}
