package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestExecOnOpenSandbox runs `sage exec --mode remote --remote-provider
// opensandbox` against the fake lifecycle server and execd: the session
// names the thread, so the second call finds the first one's sandbox.
func TestExecOnOpenSandbox(t *testing.T) {
	srv := opensandboxtest.New(t)
	home := sandboxtest.TempDir(t)
	run := func(args ...string) cliRun {
		cmd := exec.Command(sageBin, append([]string{"exec", "--mode", "remote", "--remote-provider", "opensandbox",
			"--opensandbox-url", srv.URL, "--opensandbox-api-key-env", "OSB_TEST_KEY", "--session", "osb"}, args...)...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "OSB_TEST_KEY="+srv.APIKey,
			"SAGE_OPENSANDBOX_EXECD_TOKEN="+srv.ExecdToken, "SAGE_OPENSANDBOX_WORKSPACE=auto")
		return runCmd(t, cmd)
	}
	r := run("--", "echo made > note.txt; echo out; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Equal(t, "out\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	r = run("--", "cat note.txt")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "made\n", r.stdout, "the session's sandbox is found again")
	assert.Equal(t, 1, srv.Live())

	cmd := exec.Command(sageBin, "exec", "--mode", "remote", "--remote-provider", "opensandbox",
		"--opensandbox-url", srv.URL, "--opensandbox-api-key-env", "OSB_UNSET_KEY", "--", "true")
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home)
	r = runCmd(t, cmd)
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "api_key_env")
	assert.Contains(t, r.stderr, "OSB_UNSET_KEY")
}

// cliOp is one sage command line against an opensandbox sandbox and what
// it must give.
type cliOp struct {
	args           []string
	stdin          string
	code           int
	stdout, stderr string // wanted exactly (stdout) or contained (stderr); "" : not checked
	stdoutHas      string // contained in stdout
}

// openSandboxCLIOps are the command lines issue 32 found wrong against
// the real OpenSandbox, and their neighbours.
func openSandboxCLIOps() []cliOp {
	seq := ""
	for i := 1; i <= 35000; i++ {
		seq += strconv.Itoa(i) + "\n"
	}
	return []cliOp{
		{args: []string{"exec", "--", "echo a; echo b"}, stdout: "a\nb\n"},
		{args: []string{"exec", "--", "seq 1 35000"}, stdout: seq},
		{args: []string{"exec", "--", "printf 'no end'"}, stdout: "no end"},
		// Live output has each line end as \n (the events lose which it
		// was); the result has the exact bytes, read from execd's file.
		{args: []string{"exec", "--json", "--", "printf 'a\\r\\nb\\n\\nc\\n'"}, stdoutHas: `"stdout": "a\r\nb\n\nc\n"`},
		{args: []string{"exec", "--", "echo err >&2; exit 3"}, code: 3, stderr: "err\n"},
		{args: []string{"exec", "--", "kill -9 $$"}, code: 137},
		{args: []string{"exec", "--", "kill -TERM $$"}, code: 143},
		{args: []string{"exec", "--", `echo "$0"`}, stdout: "bash\n"},
		{args: []string{"fs", "write", "f.txt"}, stdin: "one\n"},
		{args: []string{"fs", "write", "f.txt"}, stdin: "two"},
		{args: []string{"fs", "read", "f.txt"}, stdout: "two"},
		{args: []string{"fs", "write", "--append", "f.txt"}, stdin: "+3"},
		{args: []string{"fs", "read", "f.txt"}, stdout: "two+3"},
		{args: []string{"exec", "--", "ln -s /etc/hostname link"}},
		{args: []string{"fs", "write", "link"}, stdin: "mine"},
		{args: []string{"exec", "--", "cat link; test -L link || echo ' replaced'"}, stdout: "mine replaced\n"},
		{args: []string{"fs", "rm", "f.txt"}},
		{args: []string{"fs", "read", "f.txt"}, code: 1, stderr: "f.txt"},
		{args: []string{"python", "-c", "6*7"}, stdout: "42\n"},
		{args: []string{"python", "-c", "print(1)"}, stdout: "1\n"},
		{args: []string{"python", "-c", "raise ValueError('bad')"}, code: 1, stderr: "ValueError: bad"},
		{args: []string{"python", "-c", "import sys; sys.exit(4)"}, code: 4},
	}
}

// osbTarget is the lifecycle server (and what its sandboxes need) the
// command lines run against.
type osbTarget struct {
	url, apiKey, execdToken, execdTmp, workspace, image string
}

func fakeTarget(srv *opensandboxtest.Server, ws string) osbTarget {
	if ws == "" {
		ws = "auto"
	}
	return osbTarget{url: srv.URL, apiKey: srv.APIKey, execdToken: srv.ExecdToken, execdTmp: srv.ExecdTmp, workspace: ws}
}

// runOpenSandboxCLIOps runs every op against tg and returns how many gave
// what they must.
func runOpenSandboxCLIOps(t *testing.T, tg osbTarget) (held, all int) {
	home := sandboxtest.TempDir(t)
	for i, op := range openSandboxCLIOps() {
		n := 1 // the subcommand ("fs write": two words), then the flags
		if op.args[0] == "fs" {
			n = 2
		}
		args := append([]string{}, op.args[:n]...)
		args = append(args, "--mode", "remote", "--remote-provider", "opensandbox", "--opensandbox-url", tg.url,
			"--opensandbox-api-key-env", "OSB_TEST_KEY", "--session", "osbops")
		args = append(args, op.args[n:]...)
		cmd := exec.Command(sageBin, args...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "OSB_TEST_KEY="+tg.apiKey,
			"SAGE_OPENSANDBOX_EXECD_TOKEN="+tg.execdToken, "SAGE_OPENSANDBOX_WORKSPACE="+tg.workspace,
			"SAGE_OPENSANDBOX_EXECD_TMPDIR="+tg.execdTmp, "SAGE_OPENSANDBOX_IMAGE="+tg.image)
		cmd.Stdin = strings.NewReader(op.stdin)
		r := runCmd(t, cmd)
		ok := assert.Equal(t, op.code, r.code, "op %d %q: stderr %q", i, op.args, r.stderr)
		if op.stdoutHas != "" {
			ok = assert.Contains(t, r.stdout, op.stdoutHas, "op %d %q", i, op.args) && ok
		} else if op.stdout != "" || op.code == 0 && op.stderr == "" {
			ok = assert.Equal(t, op.stdout, r.stdout, "op %d %q", i, op.args) && ok
		}
		if op.stderr != "" {
			ok = assert.Contains(t, r.stderr, op.stderr, "op %d %q", i, op.args) && ok
		}
		all++
		if ok {
			held++
		}
	}
	return held, all
}

// TestOpenSandboxCLIOperations runs the command lines of issue 32 through
// the fake lifecycle server and execd.
func TestOpenSandboxCLIOperations(t *testing.T) {
	srv := opensandboxtest.New(t)
	held, all := runOpenSandboxCLIOps(t, fakeTarget(srv, ""))
	t.Logf("%d of %d CLI operations hold", held, all)
}

// TestOpenSandboxCLIOperationsRealExecd runs them against the real execd
// of SAGE_OPENSANDBOX_EXECD_URL (opt-in; see the opensandbox package's
// TestRealExecdContract for the variables), the lifecycle server being
// the fake one.
func TestOpenSandboxCLIOperationsRealExecd(t *testing.T) {
	url := os.Getenv("SAGE_OPENSANDBOX_EXECD_URL")
	if url == "" {
		t.Skip("no real execd: set SAGE_OPENSANDBOX_EXECD_URL (and _TOKEN, _TMPDIR, _WORKDIR)")
	}
	srv := opensandboxtest.New(t)
	srv.ExecdAddr, srv.ExecdToken = strings.TrimPrefix(url, "http://"), os.Getenv("SAGE_OPENSANDBOX_EXECD_TOKEN")
	if srv.ExecdTmp = os.Getenv("SAGE_OPENSANDBOX_EXECD_TMPDIR"); srv.ExecdTmp == "" {
		srv.ExecdTmp = "/tmp"
	}
	work := os.Getenv("SAGE_OPENSANDBOX_EXECD_WORKDIR")
	if work == "" {
		work = "/tmp"
	}
	ws := filepath.Join(work, "sage-cli-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	// The workspace outlives the sandbox (which is only the fake's record):
	// remove it from the real execd.
	t.Cleanup(func() {
		assert.NoError(t, opensandbox.NewExecdClient(url, srv.ExecdToken, nil, nil).RemoveDirs(context.Background(), ws))
	})
	held, all := runOpenSandboxCLIOps(t, fakeTarget(srv, ws))
	t.Logf("%d of %d CLI operations hold against the real execd", held, all)
}

// TestOpenSandboxCLIOperationsRealServer runs them against a real
// OpenSandbox lifecycle server (opt-in: SAGE_OPENSANDBOX_TEST_URL, _API_KEY,
// _IMAGE, as the opensandbox package's TestRealServerContract), in one
// sandbox kept for the session and deleted at the end.
func TestOpenSandboxCLIOperationsRealServer(t *testing.T) {
	url := os.Getenv("SAGE_OPENSANDBOX_TEST_URL")
	if url == "" {
		t.Skip("no real OpenSandbox server: set SAGE_OPENSANDBOX_TEST_URL (and _API_KEY, _IMAGE)")
	}
	tg := osbTarget{url: url, apiKey: os.Getenv("SAGE_OPENSANDBOX_TEST_API_KEY"), workspace: "/workspace",
		image: os.Getenv("SAGE_OPENSANDBOX_TEST_IMAGE")}
	t.Cleanup(func() {
		life := opensandbox.NewLifecycleClient(url, tg.apiKey, nil)
		list, err := life.List(context.Background(), map[string]string{opensandbox.LabelThread: "osbops"})
		if assert.NoError(t, err) {
			for _, sb := range list {
				assert.NoError(t, life.Delete(context.Background(), sb.ID))
			}
		}
	})
	held, all := runOpenSandboxCLIOps(t, tg)
	t.Logf("%d of %d CLI operations hold against the real server", held, all)
}
