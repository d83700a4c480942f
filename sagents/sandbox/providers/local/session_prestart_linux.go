//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// prestartSession starts the session sandbox in the background when
// SessionOptions.Prestart asks for it (NewWithOptions). It holds the
// session slot while the sandbox starts, so a command arriving meanwhile
// waits for it rather than starting a second one, and Close waits for it
// and stops it.
func (s *Sandbox) prestartSession() {
	if !s.sess.opts.Enabled || !s.sess.opts.Prestart {
		return
	}
	go func() {
		l, _, err := s.session(context.Background(), nil)
		if err != nil {
			slog.Debug("local sandbox: prestarting the session sandbox failed; the first command starts it", "err", err)
			return
		}
		l.idle() // no command ran: the idle clock starts now
	}()
}

// ping waits until the supervisor answers on the control channel (it
// has started and serves), at most sessionStartTimeout, and checks that
// it speaks this build's protocol.
func (l *liveSession) ping() error {
	if err := l.pong(); err != nil {
		return fmt.Errorf("local: session sandbox: %w", err)
	}
	return nil
}

// pong is ping's check, its error without the prefix.
func (l *liveSession) pong() error {
	req := supervisor.Request{Op: "ping"}
	ch, forget := l.register(&req)
	defer forget()
	if err := l.send(req); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.Op != "pong" {
			return fmt.Errorf("ping answered %q: %s", r.Op, r.Err)
		}
		if r.Protocol != supervisor.Protocol {
			return fmt.Errorf("the supervisor speaks protocol %d, this program %d (a stale build)", r.Protocol, supervisor.Protocol)
		}
		return nil
	case <-l.dead:
		return fmt.Errorf("the session sandbox ended before it served%s: %w", l.logTail(), io.ErrUnexpectedEOF)
	case <-time.After(sessionStartTimeout):
		return fmt.Errorf("no answer from the supervisor in %s", sessionStartTimeout)
	}
}

// logTail is the last line the session wrote to session.log (the
// supervisor's stderr), as ` ("...")`, or "" when it wrote none.
func (l *liveSession) logTail() string { return l.log.tail() }
