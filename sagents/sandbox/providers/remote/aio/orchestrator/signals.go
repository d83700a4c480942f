package orchestrator

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ShutdownOnSignal is for applications that want the provider shut down
// when the process is asked to stop: on the first of sigs (SIGTERM and
// SIGINT when none are given) it calls Shutdown, bounded by grace. The
// library never installs handlers by itself. The signals stay caught
// until stop is called; stop is safe to call more than once.
func (p *Provider) ShutdownOnSignal(grace time.Duration, sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		sigs = []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	}
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case <-ch:
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			p.Shutdown(ctx)
		case <-done:
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { signal.Stop(ch); close(done) }) }
}
