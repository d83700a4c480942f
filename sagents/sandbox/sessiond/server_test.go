package sessiond

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

type served struct {
	*Server
	home, dir string
	done      chan error
}

// serve runs a Server over a passthrough sandbox (the protocol and the
// life cycle do not depend on the mode) until the test ends.
func serve(t *testing.T, idle time.Duration) *served {
	t.Helper()
	return serveObserved(t, idle, nil)
}

// serveObserved is serve with obs as the sandbox's and the server's
// Observer.
func serveObserved(t *testing.T, idle time.Duration, obs *observability.Manager) *served {
	t.Helper()
	home := sandboxtest.TempDir(t)
	dir, err := Dir(home, "t")
	require.NoError(t, err)
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: filepath.Join(home, "ws"), Observer: obs})
	require.NoError(t, err)
	return start(t, &Server{Name: "t", Dir: dir, Sandbox: h, Settings: "want", IdleTimeout: idle, Logf: t.Logf, Observer: obs}, home)
}

// start serves srv (of SAGE_HOME home) until the test ends, once it said
// it is ready.
func start(t *testing.T, srv *Server, home string) *served {
	t.Helper()
	rr, rw, err := os.Pipe()
	require.NoError(t, err)
	defer rr.Close()
	srv.Ready = rw
	s := &served{Server: srv, home: home, dir: srv.Dir, done: make(chan error, 1)}
	go func() { s.done <- s.Serve(context.Background()) }()
	said, _ := io.ReadAll(rr)
	require.Equal(t, "ok", string(said))
	t.Cleanup(func() {
		s.Shutdown()
		select {
		case <-s.done:
		case <-time.After(60 * time.Second):
			t.Error("the server did not end")
		}
	})
	return s
}

// ended waits for Serve to return.
func (s *served) ended(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		require.NoError(t, err)
		s.done <- nil
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not end")
	}
}

func (s *served) assertCleanedUp(t *testing.T) {
	t.Helper()
	for _, f := range []string{sockName, infoName, lockName} {
		_, err := os.Lstat(filepath.Join(s.dir, f))
		assert.ErrorIs(t, err, os.ErrNotExist, f)
	}
}

func TestServerExecStreamsStdinAndStatus(t *testing.T) {
	s := serve(t, 0)
	var out, errb bytes.Buffer
	r, err := Call(context.Background(), s.dir, Request{Op: OpExec, Settings: "want", Command: "cat; echo e >&2; exit 3",
		Stream: true, Stdin: true}, Streams{Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errb})
	require.NoError(t, err)
	assert.Equal(t, 3, r.Result.ExitCode)
	assert.Equal(t, "in", out.String())
	assert.Equal(t, "e\n", errb.String())
	assert.Empty(t, r.Result.Stdout, "streamed, not repeated in the result")

	r, err = Call(context.Background(), s.dir, Request{Op: OpExec, Command: "echo kept"}, Streams{})
	require.NoError(t, err)
	assert.Equal(t, "kept\n", r.Result.Stdout, "not streamed: in the result")

	info, err := Describe(context.Background(), s.dir)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), info.PID)
	assert.Equal(t, "want", info.Settings)
	assert.Positive(t, info.MemoryBytes)
}

func TestServerRefusesOtherSettingsAndVersions(t *testing.T) {
	s := serve(t, 0)
	_, err := Call(context.Background(), s.dir, Request{Op: OpExec, Settings: "other", Command: "echo no"}, Streams{})
	assert.ErrorIs(t, err, ErrSettings)
	c, err := dial(s.dir)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, writeJSON(c, kindRequest, Request{V: protocolVersion + 1, Op: OpInfo}))
	var r Response
	require.NoError(t, readJSON(c, kindResponse, &r))
	assert.Equal(t, "protocol", r.Kind, r.Error)

	// An oversized frame is refused without reading it.
	c2, err := dial(s.dir)
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Write([]byte{kindRequest, 0x7f, 0, 0, 0})
	require.NoError(t, err)
	require.NoError(t, readJSON(c2, kindResponse, &r))
	assert.Equal(t, "protocol", r.Kind, r.Error)
}

// Stop ends the commands in flight, closes the sandbox and cleans up
// before the client's Stop returns.
func TestServerStop(t *testing.T) {
	s := serve(t, 0)
	marker := filepath.Join(s.home, "ws", "late")
	errc := make(chan error, 1)
	go func() {
		_, err := Call(context.Background(), s.dir, Request{Op: OpExec, Command: "echo started; sleep 30; touch late", Stream: true},
			Streams{Stdout: io.Discard})
		errc <- err
	}()
	waitBusy(t, s.dir)
	require.NoError(t, Stop(context.Background(), s.dir))
	s.assertCleanedUp(t)
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, ErrStopped)
	case <-time.After(30 * time.Second):
		t.Fatal("the command in flight was not ended")
	}
	s.ended(t)
	_, err := os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "the command was killed")
	assert.ErrorIs(t, Stop(context.Background(), s.dir), ErrNotRunning)
}

// waitBusy waits until the daemon runs a command.
func waitBusy(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if info, err := Describe(context.Background(), dir); err == nil && info.Busy > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command never started")
}

// A client that goes away (Ctrl-C) cancels its command.
func TestServerClientGoneCancelsCommand(t *testing.T) {
	s := serve(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := Call(ctx, s.dir, Request{Op: OpExec, Command: "sleep 30; touch late"}, Streams{})
		errc <- err
	}()
	waitBusy(t, s.dir)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if info, err := Describe(context.Background(), s.dir); err == nil && info.Busy == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, err := Describe(context.Background(), s.dir)
	require.NoError(t, err)
	assert.Zero(t, info.Busy, "the command was cancelled")
}

// The idle timeout ends the server; info requests (sage session ls) do
// not count as use.
func TestServerIdleTimeout(t *testing.T) {
	s := serve(t, 500*time.Millisecond)
	_, err := Call(context.Background(), s.dir, Request{Op: OpExec, Command: "true"}, Streams{})
	require.NoError(t, err)
	s.ended(t)
	s.assertCleanedUp(t)
	_, err = Describe(context.Background(), s.dir)
	assert.True(t, errors.Is(err, ErrNotRunning), "%v", err)
}

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", "a/b", "..", "../x", strings.Repeat("x", 65), "a b"} {
		err := CheckName(bad)
		require.Error(t, err, bad)
		assert.NotContains(t, err.Error(), "\n")
		_, err = Dir("/h", bad)
		assert.Error(t, err)
	}
	assert.NoError(t, CheckName("dev_1-x"))
}

// A daemon directory others may enter is refused.
func TestDirMustBePrivate(t *testing.T) {
	dir := filepath.Join(sandboxtest.TempDir(t), "d")
	require.NoError(t, prepareDir(dir))
	require.NoError(t, os.Chmod(dir, 0o755))
	err := prepareDir(dir)
	assert.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), "chmod 700")
}

// TestServerDropsSilentClient: a connection that sends no request is
// closed after requestTimeout, and does not hold the server's shutdown.
func TestServerDropsSilentClient(t *testing.T) {
	defer func(d time.Duration) { requestTimeout = d }(requestTimeout)
	requestTimeout = 300 * time.Millisecond
	s := serve(t, 0)
	c, err := net.Dial("unix", filepath.Join(s.dir, sockName))
	require.NoError(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the server closed the silent connection")
	assert.Less(t, time.Since(start), 10*time.Second)
	s.Shutdown()
	s.ended(t)
}
