package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// make demo's run (scripts/demo.sh) leaves no process and no session
// (issue 37, item 2: its session daemon lived on for 15 minutes, and a
// second run deleted its folder and orphaned it): run twice, nothing
// is left after either.
func TestDemoLeavesNothing(t *testing.T) {
	for _, tool := range []string{"bwrap", "python3", "bash"} {
		testenv.Command(t, tool, testenv.SetupFix)
	}
	home := shortHome(t)
	t.Cleanup(func() { sage(t, home, "", "session", "stop", "--all") })
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("bash", "../../scripts/demo.sh")
		cmd.Env = append(cliCommand(home, "").Env, "SAGE_BIN="+sageBin)
		r := runCmd(t, cmd)
		require.Equal(t, 0, r.code, "run %d:\n%s\n%s", run, r.stdout, r.stderr)
		assert.Contains(t, r.stdout, "sum: 986", "run %d", run)
		assert.Contains(t, r.stdout, "its session is stopped, nothing is left running", "run %d", run)
		assert.Equal(t, "[]\n", sage(t, home, "", "session", "ls", "--json").stdout, "run %d: no session", run)
		assertNothingLeftIn(t, home, "the demo")
	}
}
