package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

// fsInDaemon is `sage fs --session S`: the file operation runs in the
// session's daemon, on the sandbox its commands use (the same workspace,
// mounts and settings). Exit codes and messages are those of sage fs
// without a daemon: a file error (missing: fs.ErrNotExist, an escape:
// fs.ErrPermission) exits 1 with its one line; the daemon failing
// exits 125, a session started with other settings 2.
func fsInDaemon(ctx context.Context, env *cliEnv, name string, cfg sandbox.Config, idle optDuration,
	req sessiond.FSRequest, asJSON bool) int {
	call := sessiond.Request{Op: sessiond.OpFS, FS: &req}
	st := sessiond.Streams{Stderr: env.stderr}
	if req.Op == sessiond.FSRead {
		st.Stdout = env.stdout
	}
	if req.Op == sessiond.FSWrite {
		call.Stdin, st.Stdin = true, env.stdin
		if st.Stdin == nil {
			st.Stdin = eofReader{}
		}
	}
	r, err := daemonRequest(ctx, env, name, cfg, idle, call, st)
	if err == nil {
		switch {
		case req.Op == sessiond.FSList && r.FS != nil:
			err = printListing(env, r.FS.List, r.FS.Truncated, asJSON)
		case req.Op == sessiond.FSTree && r.FS != nil && r.FS.Tree != nil:
			err = printTree(env.stdout, r.FS.Tree, asJSON)
		case req.Op == sessiond.FSList || req.Op == sessiond.FSTree:
			err = fmt.Errorf("session %s: the daemon answered %s without a result", name, req.Op)
		}
		if err != nil {
			return fail(env, exitSandboxError, err)
		}
		return 0
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	if !fileError(err) {
		return fail(env, exitSandboxError, err)
	}
	if p := path.Clean(req.Path); errors.Is(err, sandbox.ErrEscape) && (p == "/tmp" || strings.HasPrefix(p, "/tmp/")) {
		// The session's /tmp lives in its sandbox's mount namespace.
		err = fmt.Errorf("%w; the session's /tmp is seen by its commands only: sage exec --session %s -- cat %s", err, name, shellQuote(p))
	}
	return fail(env, 1, escapedError{err})
}

// fileError says err is the file operation's own failure, as the daemon
// reported it, rather than the daemon's (not started, other settings,
// stopped, a protocol mismatch).
func fileError(err error) bool {
	var de *sessiond.Error
	if !errors.As(err, &de) {
		return false
	}
	for _, daemon := range []error{sessiond.ErrSettings, sessiond.ErrRefused, sessiond.ErrStopped, sessiond.ErrProtocol} {
		if errors.Is(err, daemon) {
			return false
		}
	}
	return true
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
