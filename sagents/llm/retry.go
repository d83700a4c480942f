package llm

import (
	"context"
	"errors"
	"time"
)

// retryDo runs fn until it succeeds, fails with a non-retryable error, or the
// policy's attempts or time budget run out.
func retryDo[T any](ctx context.Context, p RetryPolicy, fn func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		v, err := fn(ctx)
		if err == nil {
			return v, nil
		}
		wait, ok := nextWait(p, err, attempt, time.Since(start))
		if !ok || ctx.Err() != nil {
			return v, withAttempts(err, attempt)
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return v, withAttempts(err, attempt)
		}
	}
}

// nextWait decides whether to retry after attempt failed with err, and how
// long to wait first.
func nextWait(p RetryPolicy, err error, attempt int, elapsed time.Duration) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || !e.Retryable() || attempt >= p.MaxAttempts {
		return 0, false
	}
	wait := backoff(p, attempt)
	if e.RetryAfter > 0 {
		if e.RetryAfter > p.MaxRetryAfter {
			return 0, false // the server asks for longer than we may wait
		}
		wait = e.RetryAfter
	}
	if elapsed+wait > p.MaxElapsed {
		return 0, false
	}
	return wait, true
}

// backoff is exponential with "equal jitter": half fixed, half random, so
// that waits grow but concurrent clients spread out.
func backoff(p RetryPolicy, attempt int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	half := d / 2
	return half + time.Duration(p.Rand()*float64(d-half))
}

func withAttempts(err error, n int) error {
	var e *Error
	if errors.As(err, &e) {
		e.Attempts = n
	}
	return err
}
