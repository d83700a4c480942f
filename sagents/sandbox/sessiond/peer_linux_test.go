//go:build linux

package sessiond

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// foreignSocketEnv tells TestForeignClientHelper which daemon to try.
const foreignSocketEnv = "SAGE_TEST_SESSIOND_DIR"

// TestForeignClientHelper is the client TestForeignUIDRefused runs as
// another user: it asks the daemon to create a file and prints what
// happened.
func TestForeignClientHelper(t *testing.T) {
	dir := os.Getenv(foreignSocketEnv)
	if dir == "" {
		t.Skip("run by TestForeignUIDRefused")
	}
	marker := filepath.Join(os.Getenv("SAGE_TEST_MARKER"))
	// A raw connection: the client-side check of the daemon's uid
	// (root here) would pass anyway.
	_, err := Call(context.Background(), dir, Request{Op: OpExec, Command: "touch " + marker}, Streams{})
	fmt.Printf("FOREIGN-RESULT: %v\n", err)
}

// A client running as another uid is refused by the daemon's peer
// credential check even where the file system would let it reach the
// socket (directory and socket opened up on purpose). Controls: with the
// directory as the daemon makes it the file system stops it first, and
// with the check disabled the same client gets its command run, so the
// test can see an attack succeed.
func TestForeignUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to run a client as another uid)", "run the tests as root, as CI does")
	}
	s := serve(t, 0)
	marker := filepath.Join(s.home, "ws", "foreign-was-here")
	run := func() string {
		out, _ := testenv.RunUnprivileged(t, []string{"-test.run", "^TestForeignClientHelper$", "-test.count=1", "-test.v"},
			foreignSocketEnv+"="+s.dir, "SAGE_TEST_MARKER="+marker)
		return out
	}

	out := run()
	assert.Contains(t, out, "permission denied", "the 0700 directory keeps other users out")
	assert.NoFileExists(t, marker)

	// Open the way on purpose: every directory searchable, the socket
	// writable by all. The peer credential check must still refuse.
	require.NoError(t, os.Chmod(filepath.Join(s.home, "ws"), 0o777))
	for _, d := range []string{s.dir, filepath.Dir(s.dir), filepath.Dir(filepath.Dir(s.dir))} {
		require.NoError(t, os.Chmod(d, 0o711))
	}
	require.NoError(t, os.Chmod(filepath.Join(s.dir, sockName), 0o666))
	out = run()
	assert.Contains(t, out, "FOREIGN-RESULT: refused: this session serves uid 0 only")
	assert.NoFileExists(t, marker, "the foreign client's command did not run")

	// Without the uid check the key still stops it: another uid cannot
	// read the daemon's key file.
	admitAnyone.Store(true)
	defer admitAnyone.Store(false)
	out = run()
	assert.Contains(t, out, "FOREIGN-RESULT: refused: the request lacks this session's key")
	assert.NoFileExists(t, marker, "the foreign client's command did not run")

	// Control: without both checks, the same client gets its command run.
	trustKeyless.Store(true)
	defer trustKeyless.Store(false)
	out = run()
	assert.Contains(t, out, "FOREIGN-RESULT: <nil>")
	assert.FileExists(t, marker, "control: the attack works when the checks are off")
}
