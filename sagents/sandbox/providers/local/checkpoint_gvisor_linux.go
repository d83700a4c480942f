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

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Checkpoints under gVisor (issue 33). runsc checkpoint saves a whole
// sandbox (its processes, their memory and gVisor's in-memory root
// overlay, the session's /tmp included) into an image, and runsc restore
// starts it again from one, under the same container id once the first
// is deleted. What the image does not hold is the host: the workspace is
// a bind served by the gofer, read afresh at restore, and the host
// descriptors the sandbox holds must be handed to it again. runsc restore
// re-binds the sandbox's stdin, stdout and stderr to its own, but has no
// --pass-fd: a descriptor donated to the sandbox by runsc run --pass-fd,
// as the session sandbox's control socket is (gvisorControlFD), cannot be
// restored ("no host FD available for ...host:3"). So sage offers no
// checkpoints under gVisor yet (setupCheckpoints refuses them with
// gvisorCheckpointsReason), and sage doctor runs GvisorCheckpointProbe to
// say what this machine's runsc does.

// gvisorCheckpointsReason is why sandbox.local.checkpoints is refused with
// isolation gvisor.
const gvisorCheckpointsReason = "checkpoints need the bwrap session sandbox (isolation auto or bwrap, fresh_per_command unset or false): " +
	"under gVisor the session sandbox's control socket is a descriptor donated by runsc run --pass-fd, which runsc restore cannot hand back " +
	"(no host FD available), and a bind mount changed under the running gofer is not seen, so neither processes nor layered files can be " +
	"rolled back yet ('sage doctor' runs runsc checkpoint and restore here); fix: use isolation bwrap with checkpoints, or turn checkpoints off"

// GvisorCheckpoint is what GvisorCheckpointProbe measured.
type GvisorCheckpoint struct {
	Checkpoint time.Duration // runsc checkpoint of the idle sandbox (it stops)
	Restore    time.Duration // runsc restore --detach of that image, same id, 0 when it failed
	RestoreErr error         // why runsc restore failed, with its message
}

// GvisorCheckpointProbe starts a runsc sandbox of the session sandbox's
// shape (runsc's flags of isolation gvisor with no network, gVisor's
// memory-backed root overlay, a workspace bound through the gofer, a
// control socket donated with --pass-fd) running an idle shell, takes a
// runsc checkpoint of it, deletes it and restores the image under the
// same id. An error is a failure before the restore (runsc missing, the
// sandbox or the checkpoint failing); the restore's own failure is
// RestoreErr. It leaves nothing behind: the sandbox is deleted and its
// directories removed.
func GvisorCheckpointProbe(ctx context.Context, runsc string) (res GvisorCheckpoint, err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "sage-runsc-ckpt-")
	if err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	state, rootfs, bundle, img, ws := filepath.Join(dir, "state"), filepath.Join(dir, "rootfs"), filepath.Join(dir, "bundle"),
		filepath.Join(dir, "image"), filepath.Join(dir, "workspace")
	g := &gvisorIsolator{state: state, network: driver.NetworkOff}
	const id = "sage-ckpt-probe"
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		exec.CommandContext(dctx, runsc, "--root="+state, "delete", "--force", id).Run()
		dcancel()
		for i := 0; i < 64 && unix.Unmount(filepath.Join(state, "null-netns"), unix.MNT_DETACH) == nil; i++ {
		}
		err = errors.Join(err, os.RemoveAll(dir))
	}()
	for _, d := range []string{state, rootfs, bundle, img, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
		}
	}
	sys := systemPaths()
	for _, p := range sys {
		if p.Symlink != "" {
			if err := os.Symlink(p.Symlink, filepath.Join(rootfs, p.Path)); err != nil {
				return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
			}
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	files, dirs := etcSecrets()
	spec := GvisorSpec(GvisorOptions{Argv: []string{"/bin/sh", "-c", "echo probe > /tmp/probe; exec cat <&3 >&3"},
		Env: map[string]string{"PATH": SandboxPath}, Chdir: "/workspace", UID: 65534, GID: 65534, RootFS: rootfs, System: sys,
		Etc: true, MaskFiles: files, MaskDirs: dirs, Empty: empty, Workspace: VolumeBind{Host: ws, Inside: "/workspace"},
		TmpBytes: 16 << 20, ShmBytes: 16 << 20, Hostname: "sandbox"})
	data, err := json.Marshal(spec)
	if err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	host, inside := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	defer host.Close()
	_, err = runscStep(ctx, dir, runsc, inside, append(g.flags(), "run", "--detach",
		"--pass-fd=3:"+fmt.Sprint(gvisorControlFD), "--bundle="+bundle, id)...)
	inside.Close()
	if err != nil {
		return res, err
	}
	// The shell echoes on the control socket: the sandbox is up.
	host.SetDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4)
	if _, err := host.Write([]byte("ok\n")); err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: the sandbox's control socket: %w", err)
	}
	if _, err := io.ReadFull(host, buf[:3]); err != nil {
		return res, fmt.Errorf("local: gvisor checkpoint probe: the sandbox's control socket: %w", err)
	}
	if res.Checkpoint, err = runscStep(ctx, dir, runsc, nil, append(g.flags(), "checkpoint", "--image-path="+img, id)...); err != nil {
		return res, err
	}
	if _, err := runscStep(ctx, dir, runsc, nil, append(g.flags(), "delete", "--force", id)...); err != nil {
		return res, err
	}
	d, err := runscStep(ctx, dir, runsc, nil, append(g.flags(), "restore", "--detach", "--image-path="+img, "--bundle="+bundle, id)...)
	if err != nil {
		res.RestoreErr = err
		return res, nil
	}
	res.Restore = d
	return res, nil
}

// runscStep runs one runsc command with its output in a file (a detached
// sandbox keeps its stdio open: a pipe would never end) and says how long
// it took; its error quotes the output's telling line.
func runscStep(ctx context.Context, dir, runsc string, extra *os.File, args ...string) (time.Duration, error) {
	out, err := os.CreateTemp(dir, "out-")
	if err != nil {
		return 0, fmt.Errorf("local: gvisor checkpoint probe: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, runsc, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if err == nil {
		return d, nil
	}
	text, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(out, 0, 1<<20), 64<<10))
	verb := ""
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			verb = a
			break
		}
	}
	return d, fmt.Errorf("local: runsc %s: %w: %s", verb, err, runscErrorLine(string(text)))
}

// runscErrorLine is the line of runsc's output that says what failed (its
// restore errors come with a Go panic's stack), cut to a bound.
func runscErrorLine(out string) string {
	line := firstLines(out, 1)
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

// GvisorCheckpointsSummary says, for sage doctor, what runsc checkpoint
// and restore do here with a sandbox of the session sandbox's shape, and
// so why isolation gvisor has no checkpoints. Its error is a probe that
// could not run (no runsc, not root); a restore that fails is the
// summary's finding.
func GvisorCheckpointsSummary(ctx context.Context) (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("isolation gvisor runs runsc as root here; fix: run sage doctor as root to probe runsc checkpoint")
	}
	runsc, err := findRunsc(ctx)
	if err != nil {
		return "", err
	}
	res, err := GvisorCheckpointProbe(ctx, runsc)
	if err != nil {
		return "", fmt.Errorf("%w; fix: gVisor checkpoints are not offered anyway: use isolation bwrap with checkpoints", err)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	if res.RestoreErr != nil {
		return fmt.Sprintf("not offered under isolation gvisor (sandbox.local.checkpoints is refused there): runsc checkpoint of an idle "+
			"session-shaped sandbox took %s, but restoring it fails, since runsc restore cannot hand back the control socket "+
			"donated with --pass-fd (%v); checkpoints work with isolation bwrap", ms(res.Checkpoint), res.RestoreErr), nil
	}
	return fmt.Sprintf("not offered under isolation gvisor yet (sandbox.local.checkpoints is refused there), though this runsc "+
		"restores a session-shaped sandbox: checkpoint %s, restore %s; checkpoints work with isolation bwrap",
		ms(res.Checkpoint), ms(res.Restore)), nil
}
