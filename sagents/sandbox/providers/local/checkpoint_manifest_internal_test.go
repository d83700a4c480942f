//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManifestSlots: the manifest is written in place in two slots by
// turns; the reader takes the newest valid one, so a slot torn by a kill
// in the middle of its write gives the state of the operation before; a
// shorter manifest is padded; a bare manifest (the format before the
// slots) and slots made but never written are read too.
func TestManifestSlots(t *testing.T) {
	dir := t.TempDir()
	var got manifest
	seq, err := loadManifest(dir, &got)
	require.NoError(t, err)
	require.Zero(t, seq)
	var ms manifestSlots
	require.NoError(t, ms.open(dir, seq))
	defer ms.close()
	seq, err = loadManifest(dir, &got)
	require.NoError(t, err, "slots made, never written")
	assert.Zero(t, seq)

	m := manifest{Next: 3, Layers: []int{1}, Upper: 2, Checkpoints: []ckptEntry{{ID: "ck-a", N: 1, Size: 5}, {ID: "ck-b", N: 1}}}
	require.NoError(t, ms.write(&m)) // seq 1: manifest.b.json
	m.Checkpoints = m.Checkpoints[:1]
	m.Next = 4
	require.NoError(t, ms.write(&m)) // seq 2: manifest.json
	m.Next = 5
	require.NoError(t, ms.write(&m)) // seq 3: manifest.b.json, shorter than before: padded
	got = manifest{}
	seq, err = loadManifest(dir, &got)
	require.NoError(t, err)
	assert.Equal(t, int64(3), seq)
	assert.Equal(t, m, got)

	// A torn write of the newest slot: its bytes cut in the middle.
	b, err := os.ReadFile(filepath.Join(dir, manifestB))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestB), append(b[:len(b)/2], []byte(`"x"}`)...), 0o600))
	got = manifest{}
	seq, err = loadManifest(dir, &got)
	require.NoError(t, err)
	assert.Equal(t, int64(2), seq, "the slot before")
	assert.Equal(t, 4, got.Next)
	// A slot that parses but whose digest does not match is torn too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestB), encode(&m, 9), 0o600))
	b, _ = os.ReadFile(filepath.Join(dir, manifestB))
	require.Contains(t, string(b), `"next":5`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestB), []byte(strings.Replace(string(b), `"next":5`, `"next":6`, 1)), 0o600))
	got = manifest{}
	seq, err = loadManifest(dir, &got)
	require.NoError(t, err)
	assert.Equal(t, int64(2), seq)

	// Both torn: an error naming the fix.
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestA), []byte(`{"seq": 2, "sum": "00", "m": {}}`), 0o600))
	_, err = loadManifest(dir, &got)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fix: remove the directory")

	// The final write at Close: one manifest.json, read as a slot.
	ms2 := manifestSlots{}
	require.NoError(t, ms2.open(dir, 3))
	require.NoError(t, ms2.final(dir, &m))
	_, err = os.Stat(filepath.Join(dir, manifestB))
	assert.ErrorIs(t, err, os.ErrNotExist)
	got = manifest{}
	seq, err = loadManifest(dir, &got)
	require.NoError(t, err)
	assert.Equal(t, int64(4), seq, "even: the first slot's")
	assert.Equal(t, m, got)

	// A bare manifest, as written before the slots.
	old := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(old, manifestA), []byte(`{"next":7,"base":0,"layers":[5],"upper":6,"checkpoints":[{"id":"ck-c","n":1}]}`), 0o600))
	got = manifest{}
	seq, err = loadManifest(old, &got)
	require.NoError(t, err)
	assert.Zero(t, seq)
	assert.Equal(t, 7, got.Next)
	assert.Equal(t, "ck-c", got.Checkpoints[0].ID)
}
