package sessiond

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StartOptions say how to reach a session's daemon, and how to start one.
type StartOptions struct {
	Home string // SAGE_HOME
	Name string // the session
	// Command returns the daemon's command: this program re-executed in
	// daemon mode (it calls Serve). Ensure sets its stdin (Config), stdout
	// and stderr (the log), working directory, session and process group,
	// and passes it the readiness pipe (ReadyFile).
	Command func() *exec.Cmd
	// Config is written to the daemon's stdin.
	Config []byte
	// Notice receives one line when a crashed or hung daemon is replaced.
	Notice io.Writer
	// Timeout bounds Ensure; 0 means one minute.
	Timeout time.Duration
}

// hangGrace is how long a daemon that runs but does not answer (it is
// ending, or hung) is waited for before it is killed.
const hangGrace = 15 * time.Second

// readyEnv names the descriptor on which a daemon says it is ready.
const readyEnv = "SAGE_SESSIOND_READY_FD"

// maxLog is the log size above which a new daemon starts it afresh.
const maxLog = 1 << 20

// Ensure returns a connection to the session's daemon, starting the
// daemon when none runs. Concurrent calls (other processes too) end up
// with one daemon: starting one happens under the session's lock. A
// daemon that died is detected (a stale socket, a dead pid), reported on
// Notice and replaced.
func Ensure(ctx context.Context, o StartOptions) (*net.UnixConn, error) {
	dir, err := Dir(o.Home, o.Name)
	if err != nil {
		return nil, err
	}
	if c, err := dial(dir); err == nil {
		return c, nil
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cmpDuration(o.Timeout, time.Minute))
	defer cancel()
	var hungSince time.Time
	for {
		l, err := lock(ctx, dir)
		if err != nil {
			return nil, err
		}
		if c, err := dial(dir); err == nil {
			unlock(l, false)
			return c, nil
		}
		rec, ok, err := readRecord(dir)
		if err != nil {
			ok = true // unreadable: what a crash left
		}
		if ok && rec.alive() {
			// It is ending (its socket is gone first), or hung.
			unlock(l, false)
			if hungSince.IsZero() {
				hungSince = time.Now()
			} else if time.Since(hungSince) > hangGrace {
				fmt.Fprintf(notice(o), "sage: session %s: its daemon (pid %d) does not answer; killing it\n", o.Name, rec.PID)
				syscall.Kill(rec.PID, syscall.SIGKILL)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("session %s: daemon pid %d still ending: %w", o.Name, rec.PID, ctx.Err())
			case <-time.After(lockPoll):
			}
			continue
		}
		_, serr := os.Lstat(filepath.Join(dir, sockName))
		if ok || serr == nil {
			fmt.Fprintf(notice(o), "sage: session %s: its daemon (pid %d) died; starting a new one (the session's /tmp and processes are gone, the workspace is kept)\n", o.Name, rec.PID)
		}
		removeLeftovers(dir)
		c, err := spawn(ctx, dir, o)
		unlock(l, false)
		return c, err
	}
}

func notice(o StartOptions) io.Writer {
	if o.Notice == nil {
		return io.Discard
	}
	return o.Notice
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// spawn starts the daemon and waits until it says it is ready.
func spawn(ctx context.Context, dir string, o StartOptions) (*net.UnixConn, error) {
	logPath := filepath.Join(dir, logName)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLog {
		os.Truncate(logPath, 0)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	rr, rw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	cmd := o.Command()
	cmd.Stdin = bytes.NewReader(o.Config)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, "/"
	cmd.ExtraFiles = []*os.File{rw}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, readyEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session and process group, no terminal
	err = cmd.Start()
	rw.Close()
	if err != nil {
		return nil, fmt.Errorf("session %s: start its daemon: %w", o.Name, err)
	}
	go cmd.Wait() // reap it should it end while we live
	msg := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(rr, 4096))
		msg <- string(b)
	}()
	select {
	case m := <-msg:
		if m != "ok" {
			var r Response
			if json.Unmarshal([]byte(m), &r) == nil && r.Error != "" {
				return nil, fmt.Errorf("session %s: its daemon did not start: %w", o.Name, responseError(r))
			}
			return nil, fmt.Errorf("session %s: its daemon did not start: %s", o.Name, startFailure(m, logPath))
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		return nil, fmt.Errorf("session %s: its daemon did not start in time (see %s): %w", o.Name, logPath, ctx.Err())
	}
	return dial(dir)
}

// startFailure is why a daemon did not start: what it said, else the
// last line of its log.
func startFailure(said, logPath string) string {
	if s := strings.TrimSpace(said); s != "" {
		return s
	}
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last + " (see " + logPath + ")"
	}
	return "it exited at once (see " + logPath + ")"
}

// ReadyFile returns the descriptor a daemon started by Ensure reports
// readiness on, or nil when it was started otherwise. Write "ok" and
// close it once serving, or the reason it cannot serve (NotReady).
func ReadyFile() *os.File {
	if os.Getenv(readyEnv) != "3" {
		return nil
	}
	os.Unsetenv(readyEnv)
	return os.NewFile(3, "ready")
}

// Run is Call through Ensure: it reaches the session's daemon, starting
// one when needed, and sends req. A request without stdin that a daemon
// which was ending dropped unanswered is sent once more, to a new daemon.
func Run(ctx context.Context, o StartOptions, req Request, st Streams) (Response, error) {
	dir, err := Dir(o.Home, o.Name)
	if err != nil {
		return Response{}, err
	}
	for attempt := 0; ; attempt++ {
		c, err := Ensure(ctx, o)
		if err != nil {
			return Response{}, err
		}
		req.Key = readKey(dir)
		r, err := exchange(ctx, c, req, st)
		c.Close()
		if errors.Is(err, errNoAnswer) && !req.Stdin && attempt == 0 {
			continue
		}
		return r, err
	}
}

// NotReady tells the starter on ready (ReadyFile) why the daemon cannot
// serve, keeping err's kind (a bad setting stays ErrConfig for the
// client), and closes it.
func NotReady(ready io.WriteCloser, err error) {
	r := errorResponse(err)
	r.Error = strings.SplitN(r.Error, "\n", 2)[0]
	if b, jerr := json.Marshal(r); jerr == nil && len(b) < 4096 {
		ready.Write(b)
	} else {
		io.WriteString(ready, r.Error[:min(len(r.Error), 4000)])
	}
	ready.Close()
}
