//go:build linux

package local

import (
	"context"
	"log/slog"
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
