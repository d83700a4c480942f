//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
)

// GvisorCheckpointProbe, for sage doctor: what runsc checkpoint and
// restore do here with a sandbox shaped as a gVisor session's. runsc
// checkpoint saves a whole sandbox (its processes, their memory and
// gVisor's in-memory root overlay, the session's /tmp included) into an
// image, and runsc restore starts it again from one. What the image does
// not hold is the host: the workspace is a bind served by the gofer, read
// afresh at restore, and the host descriptors the sandbox holds must be
// handed to it again. runsc restore re-binds the sandbox's stdin, stdout
// and stderr to its own, but has no --pass-fd: a descriptor donated by
// runsc run --pass-fd cannot be restored ("no host FD available for
// ...host:3"), which is why a gVisor session with checkpoints has its
// control socket on stdin (checkpoint_gvisor_session_linux.go).

// GvisorCheckpoint is what GvisorCheckpointProbe measured.
type GvisorCheckpoint struct {
	Checkpoint time.Duration // runsc checkpoint of the idle sandbox (it stops)
	Restore    time.Duration // runsc restore --detach of that image, same id, 0 when it failed
	RestoreErr error         // why runsc restore failed, with its message
	// The same with the control socket as the sandbox's stdin and stdout
	// instead of a --pass-fd descriptor; StdioRestore counts only once a
	// new socket given to runsc restore reached the restored process.
	StdioCheckpoint, StdioRestore time.Duration
	StdioErr                      error
}

// GvisorCheckpointProbe starts a runsc sandbox of the session sandbox's
// shape (runsc's flags of isolation gvisor with no network, gVisor's
// memory-backed root overlay, a workspace bound through the gofer, a
// control socket donated with --pass-fd) running an idle shell, takes a
// runsc checkpoint of it, deletes it and restores the image under the
// same id; then the same with the control socket as the sandbox's stdin
// and stdout, which runsc restore hands back (its own), and checks that
// the restored process answers on a new socket. An error is a failure
// before a restore (runsc missing, a sandbox or a checkpoint failing); a
// restore's own failure is RestoreErr or StdioErr. It leaves nothing
// behind: the sandboxes are deleted and the directories removed.
func GvisorCheckpointProbe(ctx context.Context, runsc string) (res GvisorCheckpoint, err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "sage-runsc-ckpt-")
	if err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	p := &ckptProbe{runsc: runsc, dir: dir, state: filepath.Join(dir, "state")}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, id := range p.ids {
			exec.CommandContext(dctx, runsc, "--root="+p.state, "delete", "--force", id).Run()
		}
		dcancel()
		for i := 0; i < 64 && unix.Unmount(filepath.Join(p.state, "null-netns"), unix.MNT_DETACH) == nil; i++ {
		}
		err = errors.Join(err, os.RemoveAll(dir))
	}()
	for _, d := range []string{"state", "rootfs", "workspace"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
		}
	}
	p.sys = isolation.SystemPaths()
	for _, sp := range p.sys {
		if sp.Symlink != "" {
			if err := os.Symlink(sp.Symlink, filepath.Join(dir, "rootfs", sp.Path)); err != nil {
				return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o444); err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	if res.Checkpoint, res.Restore, res.RestoreErr, err = p.round(ctx, false); err != nil {
		return res, err
	}
	if res.StdioCheckpoint, res.StdioRestore, res.StdioErr, err = p.round(ctx, true); err != nil {
		return res, err
	}
	return res, nil
}

type ckptProbe struct {
	runsc, dir string
	state      string // runsc --root
	sys        []SystemPath
	ids        []string
}

// round runs one sandbox whose shell echoes what comes on its control
// socket (descriptor 3 by --pass-fd, or its stdin and stdout), checks it
// answers, checkpoints, deletes and restores it; with stdio the restored
// one must answer on the new socket given to runsc restore.
func (p *ckptProbe) round(ctx context.Context, stdio bool) (ckpt, restore time.Duration, restoreErr, err error) {
	name := map[bool]string{false: "passfd", true: "stdio"}[stdio]
	id, bundle, img := "sage-ckpt-probe-"+name, filepath.Join(p.dir, "bundle-"+name), filepath.Join(p.dir, "image-"+name)
	for _, d := range []string{bundle, img} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return 0, 0, nil, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
		}
	}
	echo := "exec cat <&3 >&3"
	if stdio {
		echo = "exec cat"
	}
	files, dirs := isolation.EtcSecrets()
	spec := GvisorSpec(GvisorOptions{Argv: []string{"/bin/sh", "-c", "echo probe > /tmp/probe; " + echo},
		Env: map[string]string{"PATH": isolation.SandboxPath}, Chdir: "/workspace", UID: 65534, GID: 65534, RootFS: filepath.Join(p.dir, "rootfs"),
		System: p.sys, Etc: true, MaskFiles: files, MaskDirs: dirs, Empty: filepath.Join(p.dir, "empty"),
		Workspace: VolumeBind{Host: filepath.Join(p.dir, "workspace"), Inside: "/workspace"},
		TmpBytes:  16 << 20, ShmBytes: 16 << 20, Hostname: "sandbox"})
	data, err := json.Marshal(spec)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return 0, 0, nil, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	p.ids = append(p.ids, id)
	args := append(isolation.RunscFlags(p.state), "run", "--detach", "--bundle="+bundle, id)
	if !stdio {
		args = append(isolation.RunscFlags(p.state), "run", "--detach", "--pass-fd=3:"+fmt.Sprint(gvisorControlFD), "--bundle="+bundle, id)
	}
	host, _, err := p.step(ctx, stdio, true, args...)
	if err != nil {
		return 0, 0, nil, err
	}
	defer host.Close() // open until the checkpoint: at its end the shell exits
	if err := probeEcho(host); err != nil {
		return 0, 0, nil, err
	}
	if _, ckpt, err = p.step(ctx, false, false, append(isolation.RunscFlags(p.state), "checkpoint", "--image-path="+img, id)...); err != nil {
		return 0, 0, nil, err
	}
	if _, _, err = p.step(ctx, false, false, append(isolation.RunscFlags(p.state), "delete", "--force", id)...); err != nil {
		return 0, 0, nil, err
	}
	restored, restore, restoreErr := p.step(ctx, stdio, stdio, append(isolation.RunscFlags(p.state), "restore", "--detach", "--image-path="+img, "--bundle="+bundle, id)...)
	if restoreErr != nil {
		return ckpt, 0, restoreErr, nil
	}
	if restored != nil {
		defer restored.Close()
		if err := probeEcho(restored); err != nil {
			return ckpt, 0, fmt.Errorf("local: runsc restore: the restored sandbox does not answer on the new control socket: %w", err), nil
		}
	}
	return ckpt, restore, nil, nil
}

// probeEcho writes to the probe's control socket and reads the echo.
func probeEcho(host *os.File) error {
	host.SetDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 3)
	if _, err := host.Write([]byte("ok\n")); err != nil {
		return fmt.Errorf("local: gvisor checkpoint probe: the sandbox's control socket: %w", err)
	}
	if _, err := io.ReadFull(host, buf); err != nil || string(buf) != "ok\n" {
		return fmt.Errorf("local: gvisor checkpoint probe: the sandbox's control socket: %q, %w", buf, err)
	}
	return nil
}

// step runs one runsc command with its output in a file (a detached
// sandbox keeps its stdio open: a pipe would never end) and says how
// long it took; with control it makes a socket pair whose inner end is
// the command's descriptor 3 or, with stdio, its stdin and stdout, and
// returns the host end. Its error quotes the output's telling line.
func (p *ckptProbe) step(ctx context.Context, stdio, control bool, args ...string) (*os.File, time.Duration, error) {
	out, err := os.CreateTemp(p.dir, "out-")
	if err != nil {
		return nil, 0, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, p.runsc, args...)
	cmd.Stdout, cmd.Stderr = out, out
	var host *os.File
	if control {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
		}
		inside := os.NewFile(uintptr(fds[1]), "control")
		defer inside.Close()
		host = os.NewFile(uintptr(fds[0]), "control")
		if stdio {
			cmd.Stdin, cmd.Stdout = inside, inside
		} else {
			cmd.ExtraFiles = []*os.File{inside}
		}
	}
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if err == nil {
		return host, d, nil
	}
	if host != nil {
		host.Close()
	}
	text, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(out, 0, 1<<20), 64<<10))
	verb := ""
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			verb = a
			break
		}
	}
	return nil, d, fmt.Errorf("local: runsc %s: %w: %s", verb, err, runscErrorLine(string(text)))
}

// runscErrorLine is the line of runsc's output that says what failed (its
// restore errors come with a Go panic's stack), cut to a bound.
func runscErrorLine(out string) string {
	line := isolation.FirstLines(out, 1)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "no host FD available") || strings.Contains(l, "restoring container") {
			line = strings.TrimSpace(l)
			break
		}
	}
	if i := strings.Index(line, ", map: "); i > 0 { // the map of every restorable descriptor follows
		line = line[:i]
	}
	if len(line) > 300 {
		line = line[:300] + "..."
	}
	return line
}

// GvisorCheckpointsSummary says, for sage doctor, whether checkpoints
// work under isolation gvisor here (runsc checkpoint and restore of a
// sandbox of the session sandbox's shape, its control socket on its stdin
// and stdout) and what they cost. Its error is a probe that could not run
// (no runsc, not root) or a restore that fails: then gVisor checkpoints
// would fail here too.
func GvisorCheckpointsSummary(ctx context.Context) (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("isolation gvisor runs runsc as root here; fix: run sage doctor as root to probe runsc checkpoint")
	}
	runsc, err := isolation.FindRunsc(ctx)
	if err != nil {
		return "", err
	}
	res, err := GvisorCheckpointProbe(ctx, runsc)
	if err != nil {
		return "", fmt.Errorf("%w; fix: use isolation bwrap with checkpoints", err)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	if res.StdioErr != nil {
		return "", fmt.Errorf("this runsc cannot restore a session-shaped sandbox (checkpoint %s, then %v), so checkpoints under isolation gvisor would fail; fix: use isolation bwrap with checkpoints, or a runsc that restores (bash .ci/setup.d/50-runsc.sh)",
			ms(res.StdioCheckpoint), res.StdioErr)
	}
	passFD := "a socket donated with --pass-fd is restored too"
	if res.RestoreErr != nil {
		passFD = "a socket donated with --pass-fd is not restored, hence the stdio socket"
	}
	return fmt.Sprintf("offered under isolation gvisor (the session sandbox, network off): a checkpoint is files+processes "+
		"(every process, its memory and /tmp, with a copy of the workspace); an idle session-shaped sandbox here: runsc checkpoint %s, "+
		"runsc restore %s (the control socket on the sandbox's stdin; %s); "+
		"not with fresh_per_command or the network on, nor while a command runs; while a background task or Python kernel runs, files only (the kernels by fork template)", ms(res.StdioCheckpoint), ms(res.StdioRestore), passFD), nil
}
