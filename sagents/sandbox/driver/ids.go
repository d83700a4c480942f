package driver

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"time"
)

// ValidEnvName reports whether name can be an environment variable name.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// NewID returns prefix-<12 random hex digits>, a valid sandbox id.
func NewID(prefix string) string { return prefix + "-" + randomHex(6) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// CommandTimeout is the timeout a command runs with: its own, else the
// handle's default, else DefaultTimeout.
func CommandTimeout(own, handleDefault time.Duration) time.Duration {
	switch {
	case own > 0:
		return own
	case handleDefault > 0:
		return handleDefault
	}
	return DefaultTimeout
}
