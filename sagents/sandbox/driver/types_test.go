package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTreeOptionsWithDefaults(t *testing.T) {
	assert.Equal(t, TreeOptions{MaxDepth: 3, MaxItems: 100, MaxEntries: DefaultMaxEntries}, TreeOptions{}.WithDefaults())
	assert.Equal(t, TreeOptions{MaxDepth: 3, MaxItems: 100, MaxEntries: DefaultMaxEntries}, TreeOptions{MaxDepth: -1, MaxItems: -5, MaxEntries: -1}.WithDefaults())
	// set limits are kept (control: not every answer is the defaults)
	set := TreeOptions{MaxDepth: 1, MaxItems: 2, Hidden: true, MaxEntries: 7}
	assert.Equal(t, set, set.WithDefaults())
}
