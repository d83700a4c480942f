//go:build linux

package local_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// TestUnprivileged re-runs the isolation, limit and egress tests as an ordinary
// user, which is how most people run sage (the escape suite in a fresh
// sandbox and in a session sandbox, and every red-team test with its
// controls, the session's attacks of #31 among them): there, the pids limit rests on
// RLIMIT_NPROC in the user namespace and the default memory limit on
// RLIMIT_AS, not on cgroups, and an explicit CPU time or memory limit is
// refused (the TestLimit* tests check each case).
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover it")
	}
	requireBwrap(t)
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^(TestContract|TestEscapeSuite|TestSessionEscapeSuite|TestLimit.*|TestNetworkOffAndOpen|TestEgress.*|TestTimeoutKillsTheWholeTree|TestHostStaysResponsiveDuringForkBomb|TestRedTeam.*|TestSessionSignals.*|TestDiskQuota.*|TestSessionCloseWaitsForItsProcesses)$", "-test.count=1"},
		"SAGE_TEST_UNPRIVILEGED=1")
	require.NoError(t, err, "the isolation tests failed as an unprivileged user")
}
