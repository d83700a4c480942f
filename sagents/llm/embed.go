package llm

import (
	"context"
	"fmt"
	"slices"

	openai "github.com/sashabaranov/go-openai"
)

// ErrNoEmbeddingModel is returned by Embed when Config.Embedding.Model is empty.
var ErrNoEmbeddingModel = &ConfigError{Field: "Embedding.Model", Reason: "no embedding model configured"}

// Embed returns one vector per text, in the order of texts. Texts are sent in
// batches of Config.EmbeddingBatchSize, each retried as the policy allows; a
// failure is an *EmbedBatchError naming the batch.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if c.embedding == nil {
		return nil, ErrNoEmbeddingModel
	}
	out := make([][]float32, 0, len(texts))
	for b, start := 0, 0; start < len(texts); b, start = b+1, start+c.embedBatch {
		end := min(start+c.embedBatch, len(texts))
		vecs, err := c.embedBatchOf(ctx, texts[start:end])
		if err != nil {
			return nil, &EmbedBatchError{Batch: b, Start: start, End: end, Err: err}
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// embedBatchOf embeds one batch, retried as the policy allows: one
// embeddings operation for the Observer, however many attempts it took
// (as a chat call is one, retries included).
func (c *Client) embedBatchOf(ctx context.Context, batch []string) ([][]float32, error) {
	ctx = c.observeEmbedStart(ctx, c.embedding)
	var resp *openai.EmbeddingResponse
	vecs, err := retryDo(ctx, c.retry, func(ctx context.Context) ([][]float32, error) {
		var vecs [][]float32
		var err error
		resp, vecs, err = c.embedOnce(ctx, batch)
		return vecs, err
	})
	err = withModel(err, c.embedding.cfg.Model)
	c.observeEmbedEnd(ctx, resp, err)
	return vecs, err
}

func (c *Client) embedOnce(ctx context.Context, batch []string) (*openai.EmbeddingResponse, [][]float32, error) {
	m := c.embedding
	ex := &exchange{}
	req := openai.EmbeddingRequestStrings{Input: batch, Model: openai.EmbeddingModel(m.cfg.Model), Dimensions: c.embedDims}
	resp, err := m.client().CreateEmbeddings(withExchange(ctx, ex), req)
	if err != nil {
		return nil, nil, classify(err, ex)
	}
	vecs, err := orderEmbeddings(resp.Data, len(batch))
	return &resp, vecs, err
}

// orderEmbeddings places each vector at its "index"; servers may list them in
// any order.
func orderEmbeddings(data []openai.Embedding, n int) ([][]float32, error) {
	if len(data) != n {
		return nil, &Error{Kind: KindServer, Message: fmt.Sprintf("got %d embeddings for %d inputs", len(data), n)}
	}
	out := make([][]float32, n)
	for _, d := range data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, &Error{Kind: KindServer, Message: fmt.Sprintf("bad or repeated embedding index %d", d.Index)}
		}
		out[d.Index] = slices.Clip(d.Embedding)
	}
	return out, nil
}
