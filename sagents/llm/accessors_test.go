package llm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm"
)

// The fast slot inherits the standard model's server unless it names its
// own; SetCapabilities fills only the fields it knows.
func TestClientAccessors(t *testing.T) {
	assert.Equal(t, "standard", llm.Standard.String())
	assert.Equal(t, "fast", llm.Fast.String())

	c, err := llm.New(llm.Config{
		Standard: llm.ModelConfig{BaseURL: "http://127.0.0.1:1/v1", APIKey: "k", Model: "big"},
		Fast:     llm.ModelConfig{Model: "small"},
	})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:1/v1", c.BaseURL(llm.Standard))
	assert.Equal(t, "http://127.0.0.1:1/v1", c.BaseURL(llm.Fast), "fast takes the standard server")
	assert.Equal(t, "small", c.Model(llm.Fast))

	c.SetCapabilities(llm.Fast, llm.Capabilities{Tools: llm.Supported})
	c.SetCapabilities(llm.Fast, llm.Capabilities{Multimodal: llm.Unsupported})
	got := c.Capabilities(llm.Fast)
	assert.Equal(t, llm.Supported, got.Tools, "an Unknown field leaves the earlier answer")
	assert.Equal(t, llm.Unsupported, got.Multimodal)
	assert.Equal(t, llm.Unknown, c.Capabilities(llm.Standard).Tools, "the other slot is untouched")
}
