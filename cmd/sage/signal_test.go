package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Every command ends on SIGTERM within its grace (issue 37, item 1): a
// command run in a sandbox exits 128 + the signal (143), as a shell says,
// not SIGINT's 130; a server shuts down cleanly and exits 0. Each is sent
// SIGTERM once it is at work (it printed ready on stdout or stderr).
func TestEveryCommandEndsOnSIGTERM(t *testing.T) {
	ws := sandboxtest.TempDir(t)
	for _, c := range []struct {
		name  string
		args  []string
		ready string // a line it prints once at work
		code  int
		need  string // a program it needs
	}{
		{"exec", []string{"exec", "--", "echo started; exec sleep 300"}, "started", 143, ""},
		{"exec, local", []string{"exec", "--mode", "local", "--", "echo started; sleep 300"}, "started", 143, "bwrap"},
		{"exec --session", []string{"exec", "--mode", "local", "--session", "sig", "--", "echo started; sleep 317"}, "started", 143, "bwrap"},
		{"python", []string{"python", "-c", "import time; print('started', flush=True); time.sleep(300)"}, "started", 143, "python3"},
		{"sandboxd", []string{"sandboxd", "--mode", "passthrough", "--no-token", "--listen", "127.0.0.1:0", "--workspace", ws}, "listening", 0, ""},
		{"mcp", []string{"mcp"}, "serving MCP on stdio", 0, ""},
		{"session serve", []string{"session", "serve", "sigserve"}, "serving on", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.need != "" {
				testenv.Command(t, c.need, testenv.SetupFix)
			}
			home := shortHome(t)
			t.Cleanup(func() { sage(t, home, "", "session", "stop", "--all") })
			cmd := cliCommand(home, "", c.args...)
			// stdin stays open (sage mcp serves it) until the end; session
			// serve reads its config from it.
			pr, pw, err := os.Pipe()
			require.NoError(t, err)
			defer pw.Close()
			defer pr.Close()
			cmd.Stdin = pr
			if c.name == "session serve" {
				_, err := io.WriteString(pw, `{"Mode":"passthrough","Workspace":"`+ws+`"}`)
				require.NoError(t, err)
				pw.Close()
			}
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			errOut, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			stop := watchdog(t, cmd)
			defer stop()
			lines := make(chan string, 64)
			for _, r := range []io.Reader{out, errOut} {
				go func() {
					sc := bufio.NewScanner(r)
					for sc.Scan() {
						lines <- sc.Text()
					}
				}()
			}
			var said []string
			deadline := time.After(2 * time.Minute)
		wait:
			for {
				select {
				case l := <-lines:
					said = append(said, l)
					if strings.Contains(l, c.ready) {
						break wait
					}
				case <-deadline:
					cmd.Process.Kill()
					t.Fatalf("%v never said %q: %q", c.args, c.ready, said)
				}
			}
			go func() {
				for range lines {
				}
			}()
			start := time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			err = cmd.Wait()
			took := time.Since(start)
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			assert.Equal(t, c.code, code, "%v after SIGTERM (%v)", c.args, err)
			assert.Less(t, took, termGrace, "%v ends on SIGTERM within its grace", c.args)
			t.Logf("%s ended %v after SIGTERM", c.name, took.Round(time.Millisecond))
			if c.name == "exec --session" {
				// The session outlives its command, as it should; the
				// command it ran is gone with the SIGTERM.
				assert.Eventually(t, func() bool { return len(running("sleep 317")) == 0 }, 30*time.Second, 50*time.Millisecond,
					"the command's process is gone")
				r := sage(t, home, "", "session", "stop", "sig")
				require.Equal(t, 0, r.code, r.stderr)
			}
			assertNothingLeftIn(t, home, c.name)
		})
	}
}

// SAGE_HOME=rel (relative) looped forever at 100% of a core as root
// (local.reachable walked filepath.Dir(".")), and with --session named a
// wrong fix; now it is the directory under the working directory.
func TestRelativeSageHome(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	dir := shortHome(t)
	for _, args := range [][]string{
		{"exec", "--mode", "local", "--", "pwd"},
		{"exec", "--mode", "local", "--session", "rel", "--", "pwd"},
	} {
		cmd := cliCommand("rel", "", args...)
		cmd.Dir = dir
		r := runCmdWithin(t, cmd, time.Minute)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.Equal(t, "/workspace\n", r.stdout, args)
	}
	assert.DirExists(t, dir+"/rel/sessions/rel/workspace", "SAGE_HOME is taken from the working directory")
	r := sage(t, dir+"/rel", "", "session", "stop", "rel")
	assert.Equal(t, 0, r.code, "the session started with SAGE_HOME=rel is found by its absolute path: %s", r.stderr)
}
