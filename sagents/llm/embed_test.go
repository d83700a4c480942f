package llm

import (
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func embedClient(t *testing.T, srv *llmtest.Server) *Client {
	c, _ := newClient(t, srv, func(cfg *Config) {
		cfg.Embedding = ModelConfig{Model: "embed-model"}
		cfg.EmbeddingBatchSize = 2
		cfg.EmbeddingDimensions = 2
	})
	return c
}

func TestEmbedBatchesPreserveOrder(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(llmtest.EchoEmbeddings)
	c := embedClient(t, srv)
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	vecs, err := c.Embed(ctxT(t), texts)
	require.NoError(t, err)
	require.Len(t, vecs, 5)
	for i, v := range vecs {
		assert.Equal(t, []float32{float32(len(texts[i])), float32(i % 2)}, v)
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.JSONEq(t, `{"input":["a","bb"],"model":"embed-model","dimensions":2}`, string(reqs[0].Body))
	assert.Equal(t, "/v1/embeddings", reqs[0].Path)
}

func TestEmbedErrorNamesBatch(t *testing.T) {
	srv := llmtest.New(t)
	n := 0
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		n++
		if n == 2 {
			return llmtest.Error(400, "invalid_request_error", "", "input", "input too long")
		}
		return llmtest.EchoEmbeddings(r)
	})
	c := embedClient(t, srv)
	_, err := c.Embed(ctxT(t), []string{"a", "b", "c", "d", "e"})
	var be *EmbedBatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 1, be.Batch)
	assert.Equal(t, 2, be.Start)
	assert.Equal(t, 4, be.End)
	assert.ErrorIs(t, err, ErrBadRequest)
	assert.Contains(t, err.Error(), "batch 1 (texts 2..3)")
}

func TestEmbedWithoutModel(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := newClient(t, srv)
	_, err := c.Embed(ctxT(t), []string{"x"})
	assert.ErrorIs(t, err, ErrNoEmbeddingModel)
}

func TestOrderEmbeddingsRejectsBadIndexes(t *testing.T) {
	_, err := orderEmbeddings(nil, 1)
	assert.ErrorIs(t, err, ErrServer)
}
