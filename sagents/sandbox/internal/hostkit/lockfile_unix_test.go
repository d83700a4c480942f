//go:build unix

package hostkit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweepLock: a held lock (this process's own too) is never swept; a
// second lock at its path is refused; once its holder let it go without
// Unlock (as a process killed with -9 does), SweepLock removes what it
// guarded and then the lock; a failed removal keeps the lock.
func TestSweepLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.lock")
	f, err := LockFile(path)
	require.NoError(t, err)
	_, err = LockFile(path)
	require.ErrorIs(t, err, fs.ErrExist)
	removed := 0
	remove := func() error { removed++; return nil }
	assert.False(t, SweepLock(path, remove), "a held lock")
	assert.Zero(t, removed)

	f.Close() // its holder is gone
	assert.False(t, SweepLock(path, func() error { return errors.New("busy") }))
	assert.FileExists(t, path, "a failed removal keeps the lock")
	assert.True(t, SweepLock(path, remove))
	assert.Equal(t, 1, removed)
	assert.NoFileExists(t, path)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "no temporary file is left")

	g, err := LockFile(path)
	require.NoError(t, err)
	Unlock(g, path)
	assert.NoFileExists(t, path)
}
