//go:build linux

package local

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// spareFiles are the pooled sandboxes' files in SAGE_HOME/runtime.
func spareFiles(t *testing.T, home string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(home, "runtime", "spare-*"))
	require.NoError(t, err)
	return got
}

// startPoolHelper runs TestForkPoolHelper in a new process over SAGE_HOME
// home and waits until its pool holds a pre-started sandbox, whose
// placeholder it returns; the helper runs until its stdin closes.
func startPoolHelper(t *testing.T, home string) (*testenv.HelperProcess, string) {
	t.Helper()
	h := testenv.StartHelper(t, "TestForkPoolHelper", "SAGE_POOL_HELPER=1", "SAGE_HOME="+home)
	var spare string
	if !h.ReadUntil(func(line string) bool {
		spare, _ = strings.CutPrefix(line, "spare ")
		return spare == ""
	}) {
		t.Fatal("the helper's pool did not fill")
	}
	return h, spare
}

// TestForkPoolSweptAfterKill9: a daemon killed with -9 leaves its fork
// pool's pre-started sandbox in SAGE_HOME/runtime (its placeholder
// folder, its runtime directory with its layers, its lock file). The
// next process that opens a sandbox there (this one, whose pool fills)
// removes them, and leaves those of a process still running.
func TestForkPoolSweptAfterKill9(t *testing.T) {
	if os.Getenv("SAGE_POOL_HELPER") != "" {
		t.Skip("the helper runs in TestForkPoolHelper")
	}
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	killed, dead := startPoolHelper(t, home)
	liveHelper, live := startPoolHelper(t, home)
	killed.Kill9()
	deadline := time.Now().Add(5 * time.Second)
	for len(testenv.Processes("bwrap", dead)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	left := []string{dead, dead + spareRunSuffix, dead + lockSuffix}
	for _, p := range append(left, live, live+spareRunSuffix, live+lockSuffix) {
		_, err := os.Lstat(p)
		require.NoError(t, err, "before the sweep")
	}

	t.Setenv("SAGE_HOME", home)
	s, _ := forkParent(t, 1)
	mine := waitPool(t, s, 1)[0].forkIn.placeholder
	for _, p := range left {
		assert.NoFileExists(t, p, "swept: its process is gone")
		assert.NoDirExists(t, p, "swept: its process is gone")
	}
	got := spareFiles(t, home)
	want := []string{live, live + lockSuffix, live + spareRunSuffix, mine, mine + lockSuffix, mine + spareRunSuffix}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got, "a running process's pool and this one's stay")

	liveHelper.Stdin.Close() // the live helper closes its sandboxes: its files go
	require.NoError(t, s.Close(t.Context()))
	deadline = time.Now().Add(30 * time.Second)
	for len(spareFiles(t, home)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, spareFiles(t, home), "a Close removes its pool's files")
}

// TestForkPoolHelper is TestForkPoolSweptAfterKill9's daemon: a sandbox
// with a filled fork pool, until its stdin closes.
func TestForkPoolHelper(t *testing.T) {
	if os.Getenv("SAGE_POOL_HELPER") == "" {
		t.Skip("run by TestForkPoolSweptAfterKill9")
	}
	s, _ := forkParent(t, 1)
	os.Stdout.WriteString("spare " + waitPool(t, s, 1)[0].forkIn.placeholder + "\n")
	io.Copy(io.Discard, os.Stdin)
}
