package local

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSafePrefix(t *testing.T) {
	t.Setenv("SAGE_HOME", "/srv/agents/.sage")
	home, _ := os.UserHomeDir()
	for p, want := range map[string]bool{
		"/": false, "": false, home: false, "/srv": false, "/srv/agents": false,
		"/opt/python3.12": true, home + "/.pyenv/versions/3.11.7": true,
	} {
		assert.Equal(t, want, safePrefix(p), p)
	}
	var inv invocation
	addPrefix(&inv, home, home+"/bin/node")
	assert.Equal(t, []bind{{Host: home + "/bin/node", Inside: home + "/bin/node", ReadOnly: true}}, inv.Binds,
		"a node in ~/bin shows only the binary, not the home directory")
}
