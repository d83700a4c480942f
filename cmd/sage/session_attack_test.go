//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// The session daemons against an attacker (#31, attacks 5 and 6), with
// the real CLI and its daemons. Each attack worked before #31 (5 as an
// ordinary user). TestSessionAttacksUnprivileged reruns them as one.

// attackHome is a SAGE_HOME with a short path (a unix socket's path is at
// most 107 bytes, and the unprivileged rerun's temporary directory is
// deep), searchable by a session uid as root, whose session daemons are
// stopped at the end of the test.
func attackHome(t *testing.T) string {
	t.Helper()
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	dir, err := os.MkdirTemp("/tmp", "s31-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	home := filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o711))
	t.Cleanup(func() {
		sage(t, home, "", "session", "stop", "--all")
		os.RemoveAll(dir)
	})
	return home
}

// pyDaemonClient is Python that speaks the session daemon's protocol on
// the socket argv[1] (with the key argv[2] names, when it can read it):
// it asks for argv[3] to run and prints what the daemon sent back.
const pyDaemonClient = `import json, socket, struct, sys
sock, keyfile, command = sys.argv[1:4]
req = {"v": 2, "op": "exec", "command": command, "timeout": 10000000000}
try:
    req["key"] = open(keyfile).read().strip()
except OSError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sock)
except OSError as e:
    print("CONNECT-FAILED", e); sys.exit()
b = json.dumps(req).encode()
s.sendall(b"Q" + struct.pack(">I", len(b)) + b)
f = s.makefile("rb")
while True:
    h = f.read(5)
    if len(h) < 5:
        break
    kind, n = h[:1], struct.unpack(">I", h[1:])[0]
    payload = f.read(n)
    if kind == b"o":
        sys.stdout.write("OUT " + payload.decode())
    elif kind == b"R":
        print("RESPONSE", payload.decode())
        break
`

// TestSessionAttackMountCoversHome: a sandbox with a read-only mount that
// covers SAGE_HOME (SAGE_HOME itself, or a parent such as the $HOME that
// holds ~/.sage) would see another session's daemon socket, connect to it
// and run commands in that session (attack 5). Such a mount is refused,
// in a fresh sandbox and in a session. Control: the same attack with a
// mount beside SAGE_HOME starts, runs and finds no socket.
func TestSessionAttackMountCoversHome(t *testing.T) {
	testenv.Command(t, "python3", "apt-get install python3")
	home := attackHome(t)
	parent := filepath.Dir(home)
	r := inSession(t, home, "victim", "", "echo victim-secret-31 > /tmp/victim-secret")
	require.Equal(t, 0, r.code, r.stderr)
	attack := func(hostPath, inside string, session bool) cliRun {
		sock := filepath.Join(inside, strings.TrimPrefix(home, hostPath), "sessions/victim/daemon/sock")
		key := filepath.Join(filepath.Dir(sock), "key")
		args := []string{"exec", "--mode", "local", "--mount", hostPath + ":" + inside + ":ro"}
		if session {
			args = append(args, "--session", "attacker")
		}
		return sage(t, home, pyDaemonClient, append(args, "--", "python3", "-", sock, key, "cat /tmp/victim-secret")...)
	}
	for _, tc := range []struct{ name, host string }{{"SAGE_HOME", home}, {"its parent", parent}} {
		for _, session := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s session=%v", tc.name, session), func(t *testing.T) {
				r := attack(tc.host, "/h", session)
				assert.NotContains(t, r.stdout, "victim-secret-31", "the sandbox ran a command in the victim's session")
				assert.NotEqual(t, 0, r.code, "the mount is refused: %s%s", r.stdout, r.stderr)
				if !session { // a session's daemon says it as it did not start
					assert.Equal(t, 2, r.code, "a bad setting: %s", r.stderr)
				}
				assert.Contains(t, r.stderr, "covers SAGE_HOME")
			})
		}
	}
	t.Run("control", func(t *testing.T) {
		beside := sandboxtest.TempDir(t)
		require.NoError(t, os.Chmod(beside, 0o755)) // readable by a session uid too
		r := attack(beside, "/h", false)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "CONNECT-FAILED", "the client ran, and found no socket beside SAGE_HOME")
	})
}

// TestSessionAttackHomeRemoved: a session whose SAGE_HOME is removed
// (rm -rf) or replaced goes on running its sandbox until its idle
// timeout, where `sage session stop` cannot find it, and under gVisor
// leaves runsc's nsfs mount behind (attack 6). Its daemon must notice
// within seconds and stop it all: no daemon, no process of the sandbox,
// no cgroup, no mount. Control: a session whose home stays keeps
// running through the same wait.
func TestSessionAttackHomeRemoved(t *testing.T) {
	for _, iso := range []string{"bwrap", "gvisor"} {
		t.Run(iso, func(t *testing.T) {
			var flags []string
			if iso == "gvisor" {
				if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
					t.Skip("isolation gvisor runs runsc as root; the unprivileged re-run checks bwrap")
				}
				if os.Geteuid() != 0 {
					testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
				}
				testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
				flags = []string{"--isolation", "gvisor"}
			}
			start := func(home, name string, n int) (daemon int, marks []string) {
				t.Helper()
				sleep := "sleep " + strconv.Itoa(n+os.Getpid()%100) // its own: the two sessions' are told apart
				r := inSession(t, home, name, "", sleep+" >/dev/null 2>&1 & echo started", flags...)
				require.Equal(t, 0, r.code, r.stderr)
				rows := sessionLsJSON(t, home)
				require.Len(t, rows, 1)
				marks = []string{filepath.Join(home, "sessions", name)} // runsc's state directory is on its command line
				if iso == "bwrap" {
					marks = append(marks, sleep) // bwrap's processes are host processes
				}
				return rows[0].PID, marks
			}
			gone := func(daemon int, marks []string) bool {
				if testenv.Alive(daemon) {
					return false
				}
				for _, m := range marks {
					if len(running(m)) > 0 {
						return false
					}
				}
				return true
			}

			kept := attackHome(t)
			keptDaemon, keptMarks := start(kept, "kept", 700)
			home := attackHome(t)
			name := "gone-" + strconv.Itoa(os.Getpid()%10000)
			daemon, marks := start(home, name, 800)
			cgroups := testenv.CgroupsMatching("sage-" + name + "-*")
			// rm -rf of the session's folder (under gVisor it fails on
			// runsc's nsfs mount point, and removes the rest).
			if err := os.RemoveAll(filepath.Join(home, "sessions")); err != nil {
				t.Logf("rm -rf: %v", err)
			}
			ok := false
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !ok; time.Sleep(100 * time.Millisecond) {
				ok = gone(daemon, marks)
			}
			if !ok {
				for _, m := range marks {
					for _, pid := range running(m) {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				syscall.Kill(daemon, syscall.SIGKILL)
			}
			assert.True(t, ok, "the session outlived its folder for 15 s (daemon pid %d)", daemon)
			for _, cg := range cgroups {
				_, err := os.Stat(cg)
				assert.True(t, os.IsNotExist(err), "cgroup %s left behind", cg)
			}
			assert.Empty(t, testenv.MountsUnder(home), "mounts left behind under the removed folder")

			assert.False(t, gone(keptDaemon, keptMarks), "control: a session whose folder stays runs on")
		})
	}
}

// TestSessionAttacksUnprivileged reruns the attacks above as an ordinary
// user (created by the test), where attack 5 used to work: the file
// system alone keeps another uid out, not the same one.
func TestSessionAttacksUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the tests above run as this user")
	}
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	dir, err := os.MkdirTemp("", "sage-unpriv-bin-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "sage")
	testenv.CopyExecutable(t, sageBin, bin)
	_, err = testenv.RunUnprivileged(t, []string{"-test.run", "^TestSessionAttack(MountCoversHome|HomeRemoved)$", "-test.count=1", "-test.v"},
		"SAGE_TEST_UNPRIVILEGED=1", sageBinEnv+"="+bin)
	require.NoError(t, err, "the attacks on session daemons worked as an unprivileged user")
}
