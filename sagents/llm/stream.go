package llm

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/observability"
)

// Stream is an open streaming chat completion. Call Recv until io.EOF, then
// Response; or call Collect. Always Close it. A Stream is not safe for
// concurrent use.
type Stream struct {
	sse     *sseReader
	body    io.ReadCloser
	cancel  context.CancelFunc
	asm     assembler
	queue   []Chunk // decoded, not yet assembled
	after   error   // an in-band error to report once queue is empty
	extras  *extraStore
	dec     chunkDecoder
	pending *Chunk // the first chunk, read before ChatStream returned
	start   time.Time
	end     time.Time
	ttft    time.Duration
	read    int   // chunks received and assembled
	err     error // sticky: io.EOF or the failure
	// last is when the latest chunk was received; intervals are the
	// times between one chunk and the next (at most
	// observability.MaxChunkIntervals), kept while an Observer waits
	// for them.
	last      time.Time
	intervals []time.Duration

	// The llm run reported to the client's Observer (nil when none).
	obs  *observability.Manager
	octx context.Context
}

// ChatStream opens a streaming chat completion. Failures before the first
// chunk are retried as the policy allows; a failure after it ends the stream
// with a *PartialStreamError.
//
// Unless the caller set StreamOptions, stream_options.include_usage is asked
// for so that the final response carries token usage; a server that rejects
// it gets the request again without it.
func (c *Client) ChatStream(ctx context.Context, r Request) (*Stream, error) {
	if r.StreamOptions == nil {
		r.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	m := c.pick(r.ModelType)
	octx := c.observeStart(ctx, m, r, true)
	s, err := send(ctx, c, m, r, c.streamOnce)
	if err != nil {
		c.observeEnd(octx, nil, err)
		return nil, err
	}
	if c.obs != nil {
		s.obs, s.octx = c.obs, octx
	}
	return s, nil
}

// streamOnce sends one attempt and waits for its first chunk.
func (c *Client) streamOnce(ctx context.Context, call *call) (*Stream, error) {
	actx, cancel := context.WithCancel(ctx)
	ex := &exchange{patch: call.plan.patch}
	var timedOut atomic.Bool
	if c.firstChunkTimeout > 0 {
		t := time.AfterFunc(c.firstChunkTimeout, func() { timedOut.Store(true); cancel() })
		defer t.Stop()
	}
	s := &Stream{cancel: cancel, start: time.Now(), extras: &c.extras}
	s.asm.lim = c.limits
	_, err := call.m.client().CreateChatCompletionStream(withExchange(actx, ex), call.plan.req)
	if err == nil {
		s.body = ex.response().Body
		s.sse = newSSEReader(s.body)
		err = s.first()
	}
	if err != nil || timedOut.Load() {
		s.Close()
		return nil, firstChunkError(ctx, err, timedOut.Load(), c.firstChunkTimeout, ex)
	}
	return s, nil
}

func firstChunkError(ctx context.Context, err error, timedOut bool, d time.Duration, ex *exchange) error {
	if timedOut && ctx.Err() == nil {
		return &Error{Kind: KindTimeout, Message: "no first chunk within " + d.String(), Err: err}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return classify(err, ex)
}

// first reads the first chunk and keeps it for Recv.
func (s *Stream) first() error {
	c, err := s.fetch()
	if err == io.EOF {
		err = &Error{Kind: KindServer, Message: "stream ended before the first chunk"}
	}
	if err != nil {
		return err
	}
	s.ttft = time.Since(s.start)
	s.pending = &c
	return nil
}

// fetch reads and assembles the next chunk.
func (s *Stream) fetch() (Chunk, error) {
	for len(s.queue) == 0 {
		if err := s.after; err != nil {
			s.after = nil
			return Chunk{}, err
		}
		data, errEvt, err := s.sse.next()
		if err != nil {
			return Chunk{}, s.endOfBody(err)
		}
		if !errEvt && string(data) == "[DONE]" {
			return Chunk{}, io.EOF
		}
		if s.queue, err = s.dec.decodeEvent(data, errEvt); err != nil {
			if len(s.queue) == 0 {
				return Chunk{}, err
			}
			s.after = err // deliver what came with the error first
		}
	}
	c := s.queue[0]
	s.queue = s.queue[1:]
	if err := s.asm.add(&c); err != nil {
		return Chunk{}, err
	}
	s.read++
	now := time.Now()
	if !s.last.IsZero() && s.obs != nil && len(s.intervals) < observability.MaxChunkIntervals {
		s.intervals = append(s.intervals, now.Sub(s.last))
	}
	s.last = now
	return c, nil
}

// endOfBody maps a body read error. A body that ends without [DONE] is
// complete only when a finish reason was seen.
func (s *Stream) endOfBody(err error) error {
	if err == io.EOF {
		if s.asm.finished {
			return io.EOF
		}
		err = io.ErrUnexpectedEOF
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, ErrEventTooLarge) { // the server's fault; retrying would not help
		return &Error{Kind: KindResponseTooLarge, Message: "a stream event above 16 MiB", Err: err}
	}
	return &Error{Kind: KindConnection, Message: "stream interrupted: " + err.Error(), Err: err}
}

// Recv returns the next chunk, or io.EOF after the last one. A failure after
// the first chunk is a *PartialStreamError.
func (s *Stream) Recv() (Chunk, error) {
	if s.pending != nil {
		c := *s.pending
		s.pending = nil
		return c, nil
	}
	if s.err != nil {
		return Chunk{}, s.err
	}
	c, err := s.fetch()
	if err != nil {
		s.finish(err)
		return Chunk{}, s.err
	}
	return c, nil
}

// finish records how the stream ended and releases the connection.
func (s *Stream) finish(err error) {
	s.end = time.Now()
	if err == io.EOF {
		s.err = io.EOF
		resp := s.Response()
		if s.extras != nil {
			s.extras.remember(resp)
		}
		s.report(resp, nil)
	} else {
		s.err = &PartialStreamError{Chunks: s.read, Partial: s.Response(), Err: err}
		s.report(nil, s.err)
	}
	s.Close()
}

// Response returns what has been assembled so far; after Recv returned
// io.EOF it is the complete response.
func (s *Stream) Response() *Response {
	r := s.asm.response()
	r.TTFT = s.ttft
	end := s.end
	if end.IsZero() {
		end = time.Now()
	}
	r.Latency = end.Sub(s.start)
	return r
}

// TTFT is the time from sending the request to the first chunk.
func (s *Stream) TTFT() time.Duration { return s.ttft }

// Collect reads the stream to its end and returns the complete response.
func (s *Stream) Collect() (*Response, error) {
	defer s.Close()
	for {
		if _, err := s.Recv(); err == io.EOF {
			return s.Response(), nil
		} else if err != nil {
			return nil, err
		}
	}
}

// Close releases the connection; it is safe to call more than once.
func (s *Stream) Close() error {
	if s.err == nil {
		s.report(nil, ErrStreamClosed)
	}
	s.cancel()
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body = nil
	return err
}
