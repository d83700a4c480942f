package hostkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnviron(t *testing.T) {
	env := Environ([]string{"PATH=/bin", "SECRET_TOKEN=x", "LC_ALL=C", "SSL_CERT_FILE=/c", "HOME=/root", "AWS_KEY=y"},
		"/ws", map[string]string{"EXTRA": "1"})
	assert.Equal(t, []string{"EXTRA=1", "HOME=/ws", "LC_ALL=C", "PATH=/bin", "SSL_CERT_FILE=/c"}, env)
	assert.Contains(t, Environ([]string{}, "", nil), "PATH="+DefaultPath)
}
