package llm

import (
	"errors"
	"io"
)

// CollectDeltas reads the stream to its end and returns the complete
// response, as Collect does, calling fn as they arrive with the text and
// the reasoning text of each chunk of the first choice that carries some
// (how an agent or a framework adapter streams an answer out). An error
// from fn stops the stream and is returned; the stream is closed either
// way.
func (s *Stream) CollectDeltas(fn func(content, reasoning string) error) (*Response, error) {
	defer s.Close()
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return s.Response(), nil
		}
		if err != nil {
			return nil, err
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 || ch.Delta.Content == "" && ch.Delta.ReasoningContent == "" {
				continue
			}
			if err := fn(ch.Delta.Content, ch.Delta.ReasoningContent); err != nil {
				return nil, err
			}
		}
	}
}
