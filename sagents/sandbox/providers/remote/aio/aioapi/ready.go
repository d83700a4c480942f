package aioapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ReadyOptions tune WaitReady; the zero value is the default.
type ReadyOptions struct {
	Token string
	// First and Max bound the exponential backoff between tries
	// (default 10 ms doubling up to 500 ms).
	First, Max time.Duration
	// TryTimeout bounds one GET (default 2 s).
	TryTimeout time.Duration
	Transport  http.RoundTripper
}

// ErrNotReady is returned (wrapped) when a sandbox's API did not answer
// 200 before the deadline.
var ErrNotReady = errors.New("aio: sandbox not ready")

// WaitReady polls GET url/v1/sandbox until it answers 200 or ctx ends,
// waiting 10 ms after the first failure and doubling up to 500 ms. Each
// try has its own short timeout, so one hung connection cannot eat the
// whole deadline.
func WaitReady(ctx context.Context, url string, o ReadyOptions) error {
	o.defaults()
	hc := &http.Client{Transport: o.Transport}
	target := strings.TrimRight(url, "/") + "/v1/sandbox"
	delay := o.First
	var last error
	for {
		if last = tryReady(ctx, hc, target, o); last == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s: %w (last try: %w)", ErrNotReady, url, ctx.Err(), last)
		case <-t.C:
		}
		delay = min(2*delay, o.Max)
	}
}

func (o *ReadyOptions) defaults() {
	if o.First <= 0 {
		o.First = 10 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 500 * time.Millisecond
	}
	if o.TryTimeout <= 0 {
		o.TryTimeout = 2 * time.Second
	}
	if o.Transport == nil {
		o.Transport = &http.Transport{Proxy: noProxyForLocal, DisableKeepAlives: true}
	}
}

func tryReady(ctx context.Context, hc *http.Client, target string, o ReadyOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.TryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return nil
}
