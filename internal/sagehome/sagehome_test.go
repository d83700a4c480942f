package sagehome

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDir(t *testing.T) {
	t.Setenv("SAGE_HOME", "/some/where")
	assert.Equal(t, "/some/where", Dir())
	wd, err := os.Getwd()
	assert.NoError(t, err)
	t.Setenv("SAGE_HOME", "rel/home/")
	assert.Equal(t, filepath.Join(wd, "rel/home"), Dir(), "a relative SAGE_HOME is taken from the working directory")
	t.Setenv("SAGE_HOME", "")
	if os.Geteuid() == 0 {
		assert.Equal(t, Root, Dir())
		return
	}
	home, err := os.UserHomeDir()
	if err != nil {
		assert.Equal(t, filepath.Join(os.TempDir(), "sage"), Dir())
		return
	}
	assert.Equal(t, filepath.Join(home, ".sage"), Dir())
}
