// Package ctxsleep waits for a duration unless a context ends first: the
// pause between the tries of a retry loop.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d, or returns ctx.Err() as soon as ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
