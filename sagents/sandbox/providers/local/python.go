package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// Where the session's Python venv and code files appear inside the
// sandbox (Linux; elsewhere they keep their host paths).
const (
	VenvPath = "/opt/sage-venv"
	CodePath = "/run/sage/code"
)

// Timeouts of the set-up steps of ExecutePython.
const (
	VenvTimeout = 2 * time.Minute
	PipTimeout  = 5 * time.Minute
)

// pythonEnv is the session's lazily created virtual environment.
type pythonEnv struct {
	dir  string // the runtime directory
	mu   sync.Mutex
	base *interpreter // nil until resolved
}

type interpreter struct {
	Executable string `json:"executable"`
	BasePrefix string `json:"base_prefix"`
}

func (p *pythonEnv) venvHost() string { return filepath.Join(p.dir, "venv") }

// addBinds shows the venv (once it exists) and its base interpreter to a
// command, with the venv first on PATH.
func (p *pythonEnv) addBinds(s *Sandbox, inv *invocation) {
	if !fileExists(filepath.Join(p.venvHost(), "pyvenv.cfg")) {
		return
	}
	p.mu.Lock()
	if p.base == nil { // a venv made by an earlier process
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p.base, _ = hostPython(ctx, s.ident)
		cancel()
	}
	base := p.base
	p.mu.Unlock()
	if base == nil {
		return
	}
	addPrefix(inv, base.BasePrefix, base.Executable)
	inside := s.iso.Place(p.venvHost(), VenvPath)
	inv.Binds = append(inv.Binds, bind{Host: p.venvHost(), Inside: inside})
	inv.Venv = inside
}

// addPrefix makes an interpreter's install prefix visible when it is not
// under the system directories that are always there. A prefix that is
// too broad to show (/, a home directory, anything holding SAGE_HOME)
// is not bound: only exe itself is, when given.
func addPrefix(inv *invocation, prefix, exe string) {
	for _, sys := range []string{"/usr/", "/bin/", "/lib/", "/lib64/", "/sbin/"} {
		if strings.HasPrefix(prefix+"/", sys) {
			return
		}
	}
	if !safePrefix(prefix) {
		if exe != "" {
			inv.Binds = append(inv.Binds, bind{Host: exe, Inside: exe, ReadOnly: true})
		}
		return
	}
	inv.Binds = append(inv.Binds, bind{Host: prefix, Inside: prefix, ReadOnly: true})
}

// safePrefix refuses directories that hold more than an interpreter: the
// root, the user's home, and any ancestor of SAGE_HOME (other sessions'
// workspaces and proxy sockets live there).
func safePrefix(prefix string) bool {
	if prefix == "/" || prefix == "" {
		return false
	}
	if home, err := os.UserHomeDir(); err == nil && within(prefix, home) {
		return false
	}
	return !within(prefix, sagehome.Dir())
}

// hostPython finds python3 on the host PATH and asks it for its real
// executable and prefix (pyenv shims and the like are scripts).
//
// When bwrap runs as the session's uid (sage is root), the interpreter
// must be one that uid can reach: python3 on PATH first, then the
// system's (/usr/bin/python3, /usr/local/bin/python3); a pyenv build under
// /root is passed over for them.
func hostPython(ctx context.Context, id *uids.Identity) (*interpreter, error) {
	var cands []string
	if py, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, py)
	}
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if fileExists(p) && !slices.Contains(cands, p) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("local: python3 not found on PATH: %w", driver.ErrUnsupported)
	}
	var errs []error
	for _, py := range cands {
		out, err := exec.CommandContext(ctx, py, "-c",
			"import json,os,sys; print(json.dumps({'executable': os.path.realpath(sys.executable), 'base_prefix': sys.base_prefix}))").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("ask %s for its prefix: %w", py, err))
			continue
		}
		var in interpreter
		if err := json.Unmarshal(out, &in); err != nil || in.Executable == "" {
			errs = append(errs, fmt.Errorf("%s answered %q", py, out))
			continue
		}
		if err := uids.Reachable(in.Executable, id, uids.NeedRead|uids.NeedExec); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", py, err))
			continue
		}
		if err := uids.Reachable(in.BasePrefix, id, uids.NeedRead|uids.NeedExec); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", py, err))
			continue
		}
		return &in, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("local: no usable python3 (fix: apt-get install python3 python3-venv): %w", errors.Join(errs...))
}

// ensureVenv creates the session's venv once, inside the sandbox, under a
// file lock so that concurrent calls, in this process or others, create
// it once.
// interpreter is the host python3 the session's venv is (or would be)
// made from, found once.
func (p *pythonEnv) interpreter(ctx context.Context, id *uids.Identity) (*interpreter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base == nil {
		base, err := hostPython(ctx, id)
		if err != nil {
			return nil, err
		}
		p.base = base
	}
	return p.base, nil
}

func (s *Sandbox) ensureVenv(ctx context.Context, opts driver.PythonOptions) error {
	p := &s.py
	if _, err := p.interpreter(ctx, s.ident); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lock := flock.New(filepath.Join(p.dir, "venv.lock"))
	ok, err := lock.TryLockContext(ctx, 20*time.Millisecond)
	if err != nil || !ok {
		return fmt.Errorf("local: venv lock: %w", errors.Join(err, ctx.Err()))
	}
	defer lock.Unlock()
	if fileExists(filepath.Join(p.venvHost(), "pyvenv.cfg")) {
		return nil
	}
	defer opts.Step("creating the session's Python environment")()
	// A half-made venv from a crash goes; the directory itself stays (a
	// running session sandbox has it bound).
	clearDir(p.venvHost())
	if err := os.MkdirAll(p.venvHost(), 0o755); err != nil {
		return fmt.Errorf("local: venv: %w", err)
	}
	if id := s.ident; id != nil { // made inside, by the session's uid
		if err := os.Lchown(p.venvHost(), id.UID, id.GID); err != nil {
			return fmt.Errorf("local: venv: %w", err)
		}
	}
	inside := s.iso.Place(p.venvHost(), VenvPath)
	inv, err := s.prepare(driver.ExecOptions{}, p.base.Executable, "-m", "venv", inside)
	if err != nil {
		return err
	}
	addPrefix(&inv, p.base.BasePrefix, p.base.Executable)
	inv.Binds = append(inv.Binds, bind{Host: p.venvHost(), Inside: inside})
	res, err := s.runInv(ctx, inv, driver.ExecOptions{Timeout: VenvTimeout})
	if err == nil && !res.Success {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr+res.Stdout))
	}
	if err != nil {
		clearDir(p.venvHost())
		return fmt.Errorf("local: create venv: %w", err)
	}
	return nil
}

// ExecutePython runs code with the session's venv Python, inside the
// sandbox; until a call needs one (Requirements), with the host's python3
// itself. The venv is created by the first call with Requirements, which
// are installed into it with pip first (PIP_INDEX_URL, PIP_FIND_LINKS and friends come
// from opts.Env or the host environment; a local find-links directory is
// shown read-only). A failed install is a *driver.RequirementsError. The code
// file lives in the session's runtime directory and is removed afterwards.
func (s *Sandbox) ExecutePython(ctx context.Context, code string, opts driver.PythonOptions) (*driver.CommandResult, error) {
	for _, r := range opts.Requirements {
		if r == "" || strings.HasPrefix(r, "-") || strings.ContainsAny(r, "\n\x00") {
			return nil, fmt.Errorf("local: requirement %q: want a requirement specifier, not an option", r)
		}
	}
	if len(opts.Requirements) == 0 && !fileExists(filepath.Join(s.py.venvHost(), "pyvenv.cfg")) {
		// Nothing to install and no venv yet: the host's python3 runs the
		// code, and the first call costs no venv (seconds). A later call
		// with requirements makes the venv, which every call uses from
		// then on.
		base, err := s.py.interpreter(ctx, s.ident)
		if err != nil {
			return nil, err
		}
		return s.runCodeFile(ctx, code, ".py", opts.ExecOptions, func(file string, inv *invocation) {
			addPrefix(inv, base.BasePrefix, base.Executable)
			inv.Argv = []string{base.Executable, file}
		})
	}
	if err := s.ensureVenv(ctx, opts); err != nil {
		return nil, err
	}
	restarted := false // the session sandbox restarted for the install
	if len(opts.Requirements) > 0 {
		res, err := s.pipInstall(ctx, opts)
		if err != nil {
			return res, err
		}
		restarted = res.SessionRestarted
	}
	res, err := s.runCodeFile(ctx, code, ".py", opts.ExecOptions, func(file string, inv *invocation) {
		inv.Argv = []string{inv.Venv + "/bin/python", file}
	})
	if res != nil && restarted {
		res.SessionRestarted = true
	}
	return res, err
}

func (s *Sandbox) pipInstall(ctx context.Context, opts driver.PythonOptions) (*driver.CommandResult, error) {
	defer opts.Step("installing the Python requirements")()
	env := pipEnv(opts.Env)
	args := []string{"", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
		"--timeout", "15", "--retries", "1"}
	inv, err := s.prepare(driver.ExecOptions{Env: env, Workdir: opts.Workdir}, append(args, opts.Requirements...)...)
	if err != nil {
		return nil, err
	}
	s.py.addBinds(s, &inv)
	inv.Argv[0] = inv.Venv + "/bin/python"
	if dir := localFindLinks(env["PIP_FIND_LINKS"]); dir != "" {
		inv.Binds = append(inv.Binds, bind{Host: dir, Inside: dir, ReadOnly: true})
	}
	res, err := s.runInv(ctx, inv, driver.ExecOptions{Timeout: PipTimeout})
	if err != nil {
		return res, fmt.Errorf("local: pip install: %w", err)
	}
	if !res.Success {
		return res, &driver.RequirementsError{Mode: "local", Requirements: opts.Requirements, Result: res}
	}
	return res, nil
}

// pipEnv takes pip's settings from the caller's env, else the host's.
func pipEnv(given map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range given {
		env[k] = v
	}
	for _, k := range []string{"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_TRUSTED_HOST"} {
		if _, ok := env[k]; !ok {
			if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
	}
	return env
}

// localFindLinks returns the directory of a local PIP_FIND_LINKS.
func localFindLinks(v string) string {
	v = strings.TrimPrefix(v, "file://")
	if !filepath.IsAbs(v) {
		return ""
	}
	if fi, err := os.Stat(v); err == nil && fi.IsDir() {
		return filepath.Clean(v)
	}
	return ""
}

// ExecuteJavaScript runs code with node, inside the sandbox. Without node
// on the host it returns an error that is driver.ErrUnsupported.
func (s *Sandbox) ExecuteJavaScript(ctx context.Context, code string, opts driver.ExecOptions) (*driver.CommandResult, error) {
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		return nil, fmt.Errorf("local: node not found on PATH: %w", driver.ErrUnsupported)
	}
	return s.runCodeFile(ctx, code, ".js", opts, func(file string, inv *invocation) {
		addPrefix(inv, filepath.Dir(filepath.Dir(node)), node)
		inv.Argv = []string{node, file}
	})
}

// runCodeFile writes code to a file in the runtime directory, shows that
// directory read-only inside, runs the command set builds, and removes
// the file.
func (s *Sandbox) runCodeFile(ctx context.Context, code, ext string, opts driver.ExecOptions, set func(file string, inv *invocation)) (*driver.CommandResult, error) {
	dir := filepath.Join(s.runtimeDir, "code")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: code dir: %w", err)
	}
	f, err := os.CreateTemp(dir, "exec-*"+ext)
	if err != nil {
		return nil, fmt.Errorf("local: code file: %w", err)
	}
	defer os.Remove(f.Name())
	if id := s.ident; id != nil { // read inside by the session's uid
		err = f.Chown(id.UID, id.GID)
	}
	if err == nil {
		_, err = f.WriteString(code)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("local: code file: %w", err)
	}
	inv, err := s.prepare(opts)
	if err != nil {
		return nil, err
	}
	s.py.addBinds(s, &inv)
	inside := s.iso.Place(dir, CodePath)
	inv.Binds = append(inv.Binds, bind{Host: dir, Inside: inside, ReadOnly: true})
	set(filepath.Join(inside, filepath.Base(f.Name())), &inv)
	return s.runInv(ctx, inv, opts)
}

// clearDir removes what dir holds, not dir itself.
func clearDir(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
