//go:build linux

package local

import (
	"context"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// TestSessionRedTeam runs the red-team attacks (and their controls)
// against commands forked by a session sandbox's supervisor.
func TestSessionRedTeam(t *testing.T) {
	rtSession = true
	defer func() { rtSession = false }()
	for name, f := range map[string]func(*testing.T){
		"InheritedDescriptor":       TestRedTeamInheritedDescriptor,
		"StdinIsAPipe":              TestRedTeamStdinIsAPipe,
		"SetuidCopyIsNotRoot":       TestRedTeamSetuidCopyIsNotRoot,
		"RootOnlyFilesStayClosed":   TestRedTeamRootOnlyFilesStayClosed,
		"InotifyQuotaIsTheSessions": TestRedTeamInotifyQuotaIsTheSessions,
		"PrivateFiles":              TestRedTeamPrivateFiles,
		"SyscallFilter":             TestRedTeamSyscallFilter,
		"NoSetIDFiles":              TestRedTeamNoSetIDFiles,
	} {
		t.Run(name, f)
	}
}

// TestSessionWorkspaceSwapped: a workspace swapped for a symlink while
// its session sandbox runs fails the next command with fs.ErrPermission
// (the running session still holds the original directory; a restart
// would bind the new path). Control: the same commands without the swap.
func TestSessionWorkspaceSwapped(t *testing.T) {
	rtSession = true
	defer func() { rtSession = false }()
	attack := func(t *testing.T, swap bool) error {
		s := rtSandbox(t, nil)
		rtRun(t, s, "true", sandbox.ExecOptions{})
		ws := s.HostWorkspacePath()
		if swap {
			require.NoError(t, os.Rename(ws, ws+".old"))
			require.NoError(t, os.Symlink("/etc", ws))
			t.Cleanup(func() { os.Remove(ws); os.Rename(ws+".old", ws) })
		}
		_, err := s.Exec(context.Background(), driver.ExecSpec{Command: "ls /workspace"})
		if err == nil {
			s.dropSession() // a restart must refuse it too
			_, err = s.Exec(context.Background(), driver.ExecSpec{Command: "ls /workspace"})
		}
		return err
	}
	assert.ErrorIs(t, attack(t, true), fs.ErrPermission)
	assert.NoError(t, attack(t, false))
}
