package sessiond

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Python runs in the daemon's sandbox: output streamed, exit status
// kept, and what one call leaves in the sandbox the next one sees.
func TestServerPython(t *testing.T) {
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	s := serveObserved(t, 0, nil)
	var out, errb bytes.Buffer
	r, err := Call(context.Background(), s.dir, Request{Op: OpPython, Settings: "want", Stream: true, Stdin: true,
		Code: "import sys; open('py.txt','w').write(sys.stdin.read()); print('out'); print('err', file=sys.stderr); sys.exit(4)"},
		Streams{Stdin: strings.NewReader("from stdin"), Stdout: &out, Stderr: &errb})
	require.NoError(t, err)
	require.NotNil(t, r.Result)
	assert.Equal(t, 4, r.Result.ExitCode)
	assert.Equal(t, "out\n", out.String())
	assert.Equal(t, "err\n", errb.String())
	r, err = Call(context.Background(), s.dir, Request{Op: OpExec, Command: "cat py.txt"}, Streams{})
	require.NoError(t, err)
	assert.Equal(t, "from stdin", r.Result.Stdout, "an exec of the session sees what Python wrote")

	_, err = Call(context.Background(), s.dir, Request{Op: OpPython, Settings: "other", Code: "print(1)"}, Streams{})
	assert.ErrorIs(t, err, ErrSettings, "python follows the settings rule of exec")
}

// File operations through the daemon: their errors are the
// *fs.PathError the sandbox returned, kind and text, on the client side.
func TestServerFSKeepsErrorKinds(t *testing.T) {
	s := serveObserved(t, 0, nil)
	ctx := context.Background()
	fsCall := func(f FSRequest, st Streams) (Response, error) {
		req := Request{Op: OpFS, Settings: "want", FS: &f}
		if st.Stdin != nil {
			req.Stdin = true
		}
		return Call(ctx, s.dir, req, st)
	}
	_, err := fsCall(FSRequest{Op: FSWrite, Path: "d/f.txt"}, Streams{Stdin: strings.NewReader("data")})
	require.NoError(t, err)
	_, err = fsCall(FSRequest{Op: FSWrite, Path: "d/f.txt", Append: true}, Streams{Stdin: strings.NewReader("+more")})
	require.NoError(t, err)
	var out bytes.Buffer
	_, err = fsCall(FSRequest{Op: FSRead, Path: "d/f.txt"}, Streams{Stdout: &out})
	require.NoError(t, err)
	assert.Equal(t, "data+more", out.String())
	r, err := fsCall(FSRequest{Op: FSList, Path: "d"}, Streams{})
	require.NoError(t, err)
	require.Len(t, r.FS.List, 1)
	assert.Equal(t, "f.txt", r.FS.List[0].Name)
	assert.EqualValues(t, 9, r.FS.List[0].Size)
	r, err = fsCall(FSRequest{Op: FSTree, Path: ".", Tree: sandbox.TreeOptions{MaxDepth: 3}}, Streams{})
	require.NoError(t, err)
	assert.Equal(t, "ws/\n  d/\n    f.txt\n", r.FS.Tree.String())

	for _, c := range []struct {
		f    FSRequest
		want []error
	}{
		{FSRequest{Op: FSRead, Path: "missing.txt"}, []error{fs.ErrNotExist}},
		{FSRequest{Op: FSList, Path: "missing"}, []error{fs.ErrNotExist}},
		{FSRequest{Op: FSRm, Path: "missing"}, []error{fs.ErrNotExist}},
		{FSRequest{Op: FSRead, Path: "../../etc/passwd"}, []error{fs.ErrPermission, sandbox.ErrEscape}},
		{FSRequest{Op: FSRead, Path: "/etc/passwd"}, []error{fs.ErrPermission, sandbox.ErrEscape}},
	} {
		_, err := fsCall(c.f, Streams{Stdout: &bytes.Buffer{}})
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe, "%+v", c.f)
		for _, w := range c.want {
			assert.ErrorIs(t, err, w, "%+v", c.f)
		}
		// Control: the sandbox itself, in this process, fails the same way.
		var direct error
		switch c.f.Op {
		case FSRead:
			_, direct = s.Sandbox.ReadFile(ctx, c.f.Path)
		case FSList:
			_, direct = s.Sandbox.ListDirectory(ctx, c.f.Path)
		case FSRm:
			direct = s.Sandbox.DeleteFile(ctx, c.f.Path)
		}
		require.Error(t, direct)
		assert.Equal(t, direct.Error(), err.Error(), "the text crosses the socket unchanged")
		assert.False(t, errors.Is(err, ErrProtocol) || errors.Is(err, ErrStopped), "a file error is not the daemon's")
	}
	_, err = fsCall(FSRequest{Op: FSRm, Path: "d"}, Streams{})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(s.home, "ws", "d"))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	_, err = fsCall(FSRequest{Op: "chmod", Path: "x"}, Streams{})
	assert.ErrorIs(t, err, ErrProtocol)
	_, err = fsCall(FSRequest{Op: FSRead, Path: "d/f.txt"}, Streams{})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Call(ctx, s.dir, Request{Op: OpFS, Settings: "other", FS: &FSRequest{Op: FSRead, Path: "x"}}, Streams{})
	assert.ErrorIs(t, err, ErrSettings, "fs follows the settings rule of exec")
}

// A write over the cap is refused and nothing is written; the control
// at the cap is written.
func TestServerFSWriteIsBounded(t *testing.T) {
	s := serveObserved(t, 0, nil)
	old := writeCap
	writeCap = 1000
	t.Cleanup(func() { writeCap = old })
	for _, n := range []int{1000, 1001 + 3*maxChunk} {
		_, err := Call(context.Background(), s.dir, Request{Op: OpFS, Stdin: true, FS: &FSRequest{Op: FSWrite, Path: "big"}},
			Streams{Stdin: bytes.NewReader(bytes.Repeat([]byte("x"), n))})
		fi, serr := os.Stat(filepath.Join(s.home, "ws", "big"))
		if n == 1000 {
			require.NoError(t, err, "control: a write at the cap")
			require.NoError(t, serr)
			assert.EqualValues(t, 1000, fi.Size())
			require.NoError(t, os.Remove(filepath.Join(s.home, "ws", "big")))
			continue
		}
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, fs.ErrInvalid)
		assert.Contains(t, err.Error(), "more than 1000 bytes")
		assert.ErrorIs(t, serr, fs.ErrNotExist, "nothing written")
	}
}

// recorder keeps the chain runs and the sandbox events, each sandbox
// event with the chain it ran under.
type recorder struct {
	observability.Base
	mu     sync.Mutex
	events []string
}

type chainKey struct{}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) ChainStart(ctx context.Context, info observability.ChainInfo) (context.Context, error) {
	r.add("chain " + info.Name + " session=" + info.SessionID)
	return context.WithValue(ctx, chainKey{}, info.Name), nil
}

func (r *recorder) SandboxStart(ctx context.Context, op observability.SandboxOp) (context.Context, error) {
	chain, _ := ctx.Value(chainKey{}).(string)
	r.add(chain + ": " + op.Op + " " + op.Path)
	return ctx, nil
}
func (r *recorder) SandboxEnd(context.Context, observability.SandboxResult) error { return nil }
func (r *recorder) SandboxError(context.Context, error) error                     { return nil }

// Every request is a chain run of the daemon's Observer, holding the
// sandbox's events of that request; stopping closes the sandbox in a
// run of its own.
func TestServerTracesRequests(t *testing.T) {
	rec := &recorder{}
	obs := observability.New(observability.Options{})
	obs.Register(rec)
	s := serveObserved(t, 0, obs)
	ctx := context.Background()
	_, err := Call(ctx, s.dir, Request{Op: OpExec, Command: "true"}, Streams{})
	require.NoError(t, err)
	_, err = Call(ctx, s.dir, Request{Op: OpFS, Stdin: true, FS: &FSRequest{Op: FSWrite, Path: "a.txt"}}, Streams{Stdin: strings.NewReader("a")})
	require.NoError(t, err)
	_, err = Call(ctx, s.dir, Request{Op: OpFS, FS: &FSRequest{Op: FSRead, Path: "nope"}}, Streams{Stdout: &bytes.Buffer{}})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Call(ctx, s.dir, Request{Op: OpBackground, Command: "true"}, Streams{})
	require.NoError(t, err)
	_, err = Describe(ctx, s.dir)
	require.NoError(t, err)
	require.NoError(t, Stop(ctx, s.dir))
	s.ended(t)
	assert.Equal(t, []string{
		": acquire ", // sandbox.New, by the test before the server (sage session serve runs it in a chain)
		"chain sage exec session=t", "sage exec: exec ",
		"chain sage fs write session=t", "sage fs write: write_file a.txt",
		"chain sage fs read session=t", "sage fs read: read_file nope",
		"chain sage exec --background session=t", "sage exec --background: start_background ",
		"chain sage session stop session=t", "sage session stop: release ",
	}, rec.got(), "info is not traced; the rest is, each under its request")

}

// A client of another protocol version (an old sage meeting a new daemon,
// or the reverse) is refused with one line naming both versions and the
// fix; nothing runs.
func TestServerRefusesOldClients(t *testing.T) {
	s := serve(t, 0)
	c, err := dial(s.dir)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, writeJSON(c, kindRequest, Request{V: 1, Op: OpExec, Command: "touch ran"}))
	var r Response
	require.NoError(t, readJSON(c, kindResponse, &r))
	assert.Equal(t, "protocol", r.Kind)
	assert.Equal(t, fmt.Sprintf("protocol error: this session's daemon speaks version %d, the client 1; fix: sage session stop t", protocolVersion), r.Error)
	_, err = os.Stat(filepath.Join(s.home, "ws", "ran"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing ran")
}

// A request over MaxRequest is refused on the client before a byte is
// sent, at once (the daemon would wait for it forever); the daemon is
// still there for the next one.
func TestClientRefusesOversizedRequest(t *testing.T) {
	s := serve(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Call(ctx, s.dir, Request{Op: OpPython, Code: strings.Repeat("#", MaxRequest)}, Streams{})
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.NoError(t, ctx.Err(), "refused at once, not when the context ended")
	r, err := Call(ctx, s.dir, Request{Op: OpExec, Command: "echo still"}, Streams{})
	require.NoError(t, err, "control: a request under the cap")
	assert.Equal(t, "still\n", r.Result.Stdout)
}

// A new client lists and stops a daemon of the previous version (here a
// stand-in that answers as version 1 did: anything but v1 refused), so
// the fix the refusal names works; a v2 daemon serves v1 info and stop.
func TestInfoAndStopAcrossVersions(t *testing.T) {
	home := sandboxtest.TempDir(t)
	dir, err := Dir(home, "old")
	require.NoError(t, err)
	require.NoError(t, prepareDir(dir))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, sockName), Net: "unix"})
	require.NoError(t, err)
	testenv.ServeConns(t, ln, func(c net.Conn) {
		var req Request
		if readJSON(c, kindRequest, &req) != nil {
			return
		}
		switch {
		case req.V != 1:
			writeJSON(c, kindResponse, errorResponse(fmt.Errorf("%w: this session's daemon speaks version 1, the client %d", ErrProtocol, req.V)))
		case req.Op == OpInfo:
			writeJSON(c, kindResponse, Response{Info: &Info{Name: "old", PID: 1}})
		default:
			writeJSON(c, kindResponse, Response{})
		}
	})
	ctx := context.Background()
	_, err = Call(ctx, dir, Request{Op: OpExec, Command: "true"}, Streams{})
	require.ErrorIs(t, err, ErrProtocol, "control: the stand-in refuses v2 as version 1 did")
	info, err := Describe(ctx, dir)
	require.NoError(t, err)
	assert.Equal(t, "old", info.Name)
	assert.NoError(t, Stop(ctx, dir))

	s := serve(t, 0)
	for _, op := range []string{OpInfo, OpStop} {
		r, err := Call(ctx, s.dir, Request{V: stableVersion, Op: op}, Streams{})
		require.NoError(t, err, op)
		if op == OpInfo {
			assert.Equal(t, "t", r.Info.Name)
		}
	}
	s.ended(t)
}

// A background task the daemon started is read, polled and killed
// through the socket: its status, its log from an offset, and kill;
// an unknown id keeps its kind (sandbox.ErrUnknownTask, fs.ErrNotExist).
func TestServerTasks(t *testing.T) {
	s := serveObserved(t, 0, nil)
	ctx := context.Background()
	r, err := Call(ctx, s.dir, Request{Op: OpBackground, Settings: "want", Command: "echo one; echo two; exec sleep 60"}, Streams{})
	require.NoError(t, err)
	require.NotNil(t, r.Task)
	id := r.Task.ID
	task := func(tr TaskRequest) (Response, error) {
		tr.ID = cmp.Or(tr.ID, id)
		return Call(ctx, s.dir, Request{Op: OpTask, Settings: "other settings: tasks need none", Task: &tr}, Streams{})
	}
	var text string
	require.Eventually(t, func() bool {
		r, err := task(TaskRequest{Op: TaskOutput})
		if err == nil && r.Output != nil {
			text = r.Output.Text
		}
		return text == "one\ntwo\n"
	}, 20*time.Second, 50*time.Millisecond)
	r, err = task(TaskRequest{Op: TaskOutput, Offset: 4, Max: 2})
	require.NoError(t, err)
	assert.Equal(t, sandbox.BackgroundOutput{Text: "tw", NextOffset: 6}, *r.Output)
	r, err = task(TaskRequest{Op: TaskStatus})
	require.NoError(t, err)
	assert.True(t, r.TaskState.Alive)
	_, err = task(TaskRequest{Op: TaskKill})
	require.NoError(t, err)
	r, err = task(TaskRequest{Op: TaskStatus})
	require.NoError(t, err)
	assert.False(t, r.TaskState.Alive, "killed")
	assert.Equal(t, "SIGTERM", r.TaskState.Signal)

	_, err = task(TaskRequest{Op: TaskStatus, ID: "nosuch"})
	assert.ErrorIs(t, err, sandbox.ErrUnknownTask)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = task(TaskRequest{Op: "bogus"})
	assert.ErrorIs(t, err, ErrProtocol)
}

// A daemon refused for other settings describes its own, so a client
// can say which differ (and never a secret).
func TestSettingsDiff(t *testing.T) {
	started := sandbox.Config{Mode: sandbox.Local, Workspace: "/w", Local: sandbox.LocalConfig{MemoryLimitMB: 1024, Network: sandbox.NetworkOff},
		Remote: sandbox.RemoteConfig{APIKey: "s3cret"}}
	b, err := settingsJSON(started)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "s3cret")
	call := started
	call.Local.MemoryLimitMB, call.Local.Network, call.Timeout = 2048, sandbox.NetworkOpen, time.Minute
	d, err := SettingsDiff(b, call)
	require.NoError(t, err)
	assert.Equal(t, []Difference{{Key: "Local.MemoryLimitMB", Session: "1024", Call: "2048"},
		{Key: "Local.Network", Session: `"off"`, Call: `"open"`}}, d, "the timeout is per command")
	d, err = SettingsDiff(b, started)
	require.NoError(t, err)
	assert.Empty(t, d, "control: the same settings differ in nothing")

	s := serveObserved(t, 0, nil)
	s.Config = &started
	info, err := Describe(context.Background(), s.dir)
	require.NoError(t, err)
	d, err = SettingsDiff(info.Config, call)
	require.NoError(t, err)
	assert.Len(t, d, 2)
}

// A bad setting keeps its kind across the socket and the readiness pipe:
// the client sees ErrConfig (the CLI exits 2), with the daemon's words.
func TestConfigErrorKeepsItsKind(t *testing.T) {
	ce := &sandbox.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: "8", Reason: "too small"}
	err := responseError(errorResponse(fmt.Errorf("local: %w", ce)))
	assert.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "disk_quota_mb")

	rr, rw, perr := os.Pipe()
	require.NoError(t, perr)
	NotReady(rw, fmt.Errorf("local: %w\nsecond line", ce))
	said, _ := io.ReadAll(rr)
	rr.Close()
	var r Response
	require.NoError(t, json.Unmarshal(said, &r))
	assert.ErrorIs(t, responseError(r), ErrConfig)
	assert.NotContains(t, r.Error, "second line")
}
