package sandbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNewValidatesFirst: a mode New does not know is a config error naming
// the field, before any driver is looked up (driver.TestRegistry covers
// the lookup of registered and unregistered modes).
func TestNewValidatesFirst(t *testing.T) {
	_, err := New(context.Background(), Config{Mode: "vm"})
	assert.ErrorContains(t, err, "sandbox.mode")
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce)
}
