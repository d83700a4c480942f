package aiodriver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// maxIdleLanes bounds the sessions kept open between calls.
const maxIdleLanes = 8

// lanes is a pool of shell sessions. A session is used by one call at a
// time: concurrent calls get different sessions, so their output cannot
// interleave (the upstream runtime's bug with one implicit session).
type lanes struct {
	c  *aioapi.Client
	ws string

	mu     sync.Mutex
	idle   []string
	all    map[string]bool
	closed bool // close ran: a session created afterwards is closed at once
}

func newLanes(c *aioapi.Client, ws string) *lanes {
	return &lanes{c: c, ws: ws, all: map[string]bool{}}
}

// get takes an idle session or creates one.
func (l *lanes) get(ctx context.Context) (string, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return "", driver.ErrClosed
	}
	if n := len(l.idle); n > 0 {
		id := l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		return id, nil
	}
	l.mu.Unlock()
	info, err := l.c.BashCreateSession(ctx, aioapi.BashSessionCreateRequest{SessionID: driver.NewID("sage-lane"), ExecDir: l.ws})
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	if l.closed { // close listed the sessions while this one was created
		l.mu.Unlock()
		l.discard(info.SessionID)
		return "", driver.ErrClosed
	}
	l.all[info.SessionID] = true
	l.mu.Unlock()
	return info.SessionID, nil
}

// put returns a session whose command has ended.
func (l *lanes) put(id string) {
	l.mu.Lock()
	if len(l.idle) < maxIdleLanes && !l.closed && l.all[id] {
		l.idle = append(l.idle, id)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.discard(id)
}

// discard kills and closes a session whose state is unknown (its call
// failed or was cancelled), in the background with its own deadline.
func (l *lanes) discard(id string) {
	l.mu.Lock()
	delete(l.all, id)
	l.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.c.BashKill(ctx, aioapi.BashKillRequest{SessionID: id, Signal: "SIGKILL"})
		_ = l.c.BashCloseSession(ctx, id)
	}()
}

// close closes every session.
func (l *lanes) close(ctx context.Context) error {
	l.mu.Lock()
	ids := make([]string, 0, len(l.all))
	for id := range l.all {
		ids = append(ids, id)
	}
	l.all, l.idle, l.closed = map[string]bool{}, nil, true
	l.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := l.c.BashCloseSession(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
