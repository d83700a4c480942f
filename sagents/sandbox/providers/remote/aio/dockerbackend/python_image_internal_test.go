package dockerbackend

import (
	"archive/tar"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// The image's Python is the host's, whole: interpreter, standard library,
// lib-dynload, every shared library they load and the program
// interpreter, at the same paths; /bin/python3 points at it.
func TestImagePythonContents(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Missing(t, "/usr/bin/python3", "apt-get install python3")
	}
	info, err := askPython("/usr/bin/python3")
	require.NoError(t, err)
	entries := map[string]*tar.Header{}
	add := func(h *tar.Header, _ []byte) error {
		if _, dup := entries[h.Name]; dup {
			t.Errorf("%s added twice", h.Name)
		}
		entries[h.Name] = h
		return nil
	}
	require.NoError(t, addPython(add, "/usr/bin/python3"))
	has := func(p string) bool { _, ok := entries["rootfs"+p]; return ok }
	assert.True(t, has(info.Exe), info.Exe)
	assert.True(t, has(path.Join(info.Stdlib, "os.py")))
	assert.False(t, has(path.Join(info.Stdlib, "site-packages")), "installed packages stay out")
	assert.Equal(t, info.Exe, entries["rootfs/bin/python3"].Linkname)
	libs, err := sharedLibraries([]string{info.Exe})
	require.NoError(t, err)
	require.NotEmpty(t, libs)
	for _, l := range libs {
		assert.True(t, has(l), "shared library %s", l)
	}
	var libc bool
	for n := range entries {
		libc = libc || strings.Contains(n, "libc.so")
	}
	assert.True(t, libc, "libc is copied")
	// And what ldd says the interpreter loads is all there.
	if out, err := exec.Command("ldd", info.Exe).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				assert.True(t, has(f) || has(strings.Replace(f, "/usr/lib/", "/lib/", 1)) || has(strings.Replace(f, "/lib/", "/usr/lib/", 1)), "ldd's %s", f)
			}
		}
	}
}

func TestImagePythonMissingLibraryIsNamed(t *testing.T) {
	_, err := sharedLibraries([]string{"/nonexistent/python"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/python")
}
