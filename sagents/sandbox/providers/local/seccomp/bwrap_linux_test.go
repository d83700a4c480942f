package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

func TestMain(m *testing.M) {
	if names := os.Getenv(probeEnv); names != "" {
		runProbes(names)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// allowSkip is true when a missing tool may skip a test instead of
// failing it (internal/testenv).
func allowSkip() bool { return testenv.SkipAllowed() }

func requireTool(t testing.TB, path, fix string) string {
	t.Helper()
	return testenv.Command(t, path, fix)
}

func requireBwrap(t testing.TB) string {
	return requireTool(t, "bwrap", "install bubblewrap (apt-get install -y bubblewrap)")
}

// sandboxArgs is the isolation the probes run in: what local mode does,
// minus the parts (mount layout, limits) that do not touch the filter.
func sandboxArgs(withFilter bool, binds ...string) []string {
	args := []string{"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"}
	for _, b := range binds {
		args = append(args, "--bind", b, b)
	}
	if withFilter {
		args = append(args, "--seccomp", "3") // ExtraFiles[0]
	}
	return args
}

// inSandbox runs argv in bwrap, under prog when it is not nil, and returns
// its combined output.
func inSandbox(t testing.TB, prog []byte, env []string, dir string, argv ...string) (string, error) {
	t.Helper()
	bwrap := requireBwrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var binds []string
	if dir != "" {
		binds = append(binds, dir)
	}
	args := append(sandboxArgs(prog != nil, binds...), "--")
	cmd := exec.CommandContext(ctx, bwrap, append(args, argv...)...)
	cmd.Env = env
	cmd.Dir = dir
	if prog != nil {
		f, err := File(prog)
		require.NoError(t, err)
		defer f.Close()
		cmd.ExtraFiles = []*os.File{f}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// probeIn runs the named probes in the sandbox and returns their errnos.
func probeIn(t *testing.T, prog []byte, ps []probe) map[string]syscall.Errno {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	env := append(os.Environ(), probeEnv+"="+strings.Join(names, ","), hostPidEnv+"="+strconv.Itoa(os.Getpid()))
	out, err := inSandbox(t, prog, env, "", exe)
	require.NoError(t, err, "probe failed:\n%s", out)
	got := map[string]syscall.Errno{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		n, err := strconv.Atoi(line[i+1:])
		require.NoError(t, err, "probe line %q", line)
		got[line[:i]] = syscall.Errno(n)
	}
	for _, n := range names {
		require.Contains(t, got, n, "probe printed no result for %s:\n%s", n, out)
	}
	return got
}

func program(t testing.TB, opts Options) []byte {
	t.Helper()
	prog, err := Program(opts)
	require.NoError(t, err)
	return prog
}

func errName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return strconv.Itoa(int(e)) + " (" + e.Error() + ")"
}

// TestFilterDeniesEachCall: each call the filter denies, made inside
// bwrap under the filter, fails with EPERM (clone3: ENOSYS).
func TestFilterDeniesEachCall(t *testing.T) {
	ps := probesFor(true)
	got := probeIn(t, program(t, Options{}), ps)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			require.Equal(t, p.want, got[p.name], "%s: got %s, want %s", p.name, errName(got[p.name]), errName(p.want))
		})
	}
}

// markerErrno is an errno none of the probed calls returns by itself.
const markerErrno = syscall.Errno(133) // EHWPOISON

// TestTheFilterIsWhatDenies: the same filter with a marker errno instead
// of EPERM. Every probe answers the marker, so the EPERMs above come from
// the filter, including for the calls (mount, kexec_load, ...) that the
// kernel refuses with EPERM anyway to a process without capabilities.
// clone3 keeps ENOSYS: with any other answer glibc's pthread_create (this
// cgo test binary's) does not fall back to clone and the probe aborts.
func TestTheFilterIsWhatDenies(t *testing.T) {
	ins, err := build(runtime.GOARCH, nil, uint32(markerErrno), errnoENOSYS)
	require.NoError(t, err)
	prog, err := encode(ins)
	require.NoError(t, err)
	ps := probesFor(true)
	got := probeIn(t, prog, ps)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			want := markerErrno
			if p.want == syscall.ENOSYS {
				want = syscall.ENOSYS
			}
			require.Equal(t, want, got[p.name], "%s: got %s", p.name, errName(got[p.name]))
		})
	}
}

// TestControlWithoutFilter: the same probes in the same bwrap without
// --seccomp. The calls marked distinct answer something else than the
// filter would: without the filter, the attacks work (keyctl reads the
// session keyring, AF_VSOCK sockets open, int 0x80 runs, ...), so the
// tests above detect a missing filter.
func TestControlWithoutFilter(t *testing.T) {
	ps := probesFor(true)
	got := probeIn(t, nil, ps)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "io_uring_setup" && ioUringDisabled() {
				t.Logf("io_uring_setup: %s without the filter: kernel.io_uring_disabled refuses it here too", errName(got[p.name]))
				return
			}
			if !p.distinct {
				t.Logf("%s: %s without the filter (the kernel refuses it here too; TestTheFilterIsWhatDenies covers it)", p.name, errName(got[p.name]))
				return
			}
			t.Logf("%s: %s without the filter", p.name, errName(got[p.name]))
			require.NotEqual(t, p.want, got[p.name], "%s answers %s even without the filter: the probe cannot tell", p.name, errName(p.want))
		})
	}
}

// ioUringDisabled reports whether the kernel.io_uring_disabled sysctl
// (Linux 6.6+) refuses io_uring_setup to this process without a filter.
func ioUringDisabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if err != nil {
		return false
	}
	v := strings.TrimSpace(string(b))
	return v == "2" || (v == "1" && os.Geteuid() != 0)
}

// TestFilterAllowsOrdinaryCalls: what programs need keeps working.
func TestFilterAllowsOrdinaryCalls(t *testing.T) {
	ps := probesFor(false)
	got := probeIn(t, program(t, Options{}), ps)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			ok := p.ok
			if ok == nil {
				ok = []syscall.Errno{0}
			}
			require.Contains(t, ok, got[p.name], "%s: got %s", p.name, errName(got[p.name]))
		})
	}
}

// TestExtraDenyInKernel: a configured name is denied, here ptrace, which
// the default filter allows (see TestFilterAllowsOrdinaryCalls).
func TestExtraDenyInKernel(t *testing.T) {
	var ps []probe
	for _, p := range probesFor(false) {
		if p.name == "ptrace child" || p.name == "socket(AF_INET)" {
			ps = append(ps, p)
		}
	}
	got := probeIn(t, program(t, Options{ExtraDeny: []string{"ptrace"}}), ps)
	require.Equal(t, syscall.EPERM, got["ptrace child"])
	require.Equal(t, syscall.Errno(0), got["socket(AF_INET)"])
}

// TestFileIsFreshEachTime: bwrap reads the memfd from its start; a
// second File of the same program works as well (one per command).
func TestFileIsFreshEachTime(t *testing.T) {
	prog := program(t, Options{})
	for range 2 {
		out, err := inSandbox(t, prog, os.Environ(), "", "/bin/true")
		require.NoError(t, err, out)
	}
	_, err := File(nil)
	require.Error(t, err)
	_, err = File(prog[:7])
	require.Error(t, err)
	f, err := File(prog)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("x"))
	require.Error(t, err, "the memfd must be sealed against writes")
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, prog, b)
}

// TestWorkloadsUnderFilter: real tools work under the filter in bwrap.
func TestWorkloadsUnderFilter(t *testing.T) {
	prog := program(t, Options{})
	goBin := "/usr/local/go/bin/go"
	if p, err := exec.LookPath("go"); err == nil {
		goBin = p
	}
	cases := []struct {
		name, tool, fix, script, want string
	}{
		{"python", "/usr/bin/python3", "apt-get install -y python3",
			`/usr/bin/python3 -c '
import subprocess, threading, socket, os, multiprocessing
t = threading.Thread(target=lambda: None); t.start(); t.join()
assert subprocess.run(["/bin/true"]).returncode == 0
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
with multiprocessing.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]
print("python-ok")'`, "python-ok"},
		{"pip", "/usr/bin/python3", "apt-get install -y python3 python3-pip python3-setuptools",
			`mkdir -p pkg/sageprobe && echo 'X = 1' > pkg/sageprobe/__init__.py &&
printf '[project]\nname = "sageprobe"\nversion = "0.1"\n[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n' > pkg/pyproject.toml &&
/usr/bin/python3 -m pip install -q --no-index --no-build-isolation --disable-pip-version-check --target site ./pkg &&
PYTHONPATH=site /usr/bin/python3 -c 'import sageprobe; print("pip-ok", sageprobe.X)'`, "pip-ok 1"},
		{"git", "/usr/bin/git", "apt-get install -y git",
			`git init -q repo && cd repo && echo a > f && git add f &&
git -c user.name=t -c user.email=t@example.com commit -q -m first && git log --oneline | wc -l | sed 's/^/git-ok /'`, "git-ok 1"},
		{"gcc", "/usr/bin/gcc", "apt-get install -y gcc",
			`printf '#include <stdio.h>\n#include <pthread.h>\nstatic void *f(void *a){return a;}\nint main(void){pthread_t t; pthread_create(&t,0,f,0); pthread_join(t,0); puts("gcc-ok"); return 0;}\n' > hello.c &&
gcc -pthread -o hello hello.c && ./hello`, "gcc-ok"},
		{"node", "/usr/bin/node", "apt-get install -y nodejs",
			`node -e '
const fs = require("fs"), cp = require("child_process");
fs.writeFileSync("n.txt", "x");
fs.promises.readFile("n.txt", "utf8").then(d => {
  if (d !== "x") throw new Error(d);
  cp.execFileSync("/bin/true");
  console.log("node-ok");
});'`, "node-ok"},
		{"go build", goBin, "install Go (https://go.dev/dl) at /usr/local/go",
			`mkdir -p mod && cd mod && printf 'module example.com/hello\n\ngo 1.21\n' > go.mod &&
printf 'package main\n\nfunc main() { println("go-ok") }\n' > main.go &&
go build -o hello . && ./hello`, "go-ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool := requireTool(t, c.tool, c.fix)
			if c.name == "pip" {
				out, err := exec.Command(tool, "-c", "import setuptools, pip").CombinedOutput()
				if err != nil {
					testenv.Missing(t, "pip or setuptools ("+strings.TrimSpace(string(out))+")", "apt-get install -y python3-pip python3-setuptools")
				}
			}
			dir := t.TempDir()
			env := []string{"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir,
				"GOCACHE=" + dir + "/gocache", "GOPATH=" + dir + "/gopath", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
				"GOPROXY=off", "GOTELEMETRY=off", "LANG=C.UTF-8"}
			out, err := inSandbox(t, prog, env, dir, "/bin/sh", "-c", c.script)
			require.NoError(t, err, "%s under the filter:\n%s", c.name, out)
			require.Contains(t, out, c.want)
		})
	}
}

// TestUnprivileged re-runs the kernel tests as an ordinary user: bwrap is
// then unprivileged and the user namespace maps that user.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover it")
	}
	requireBwrap(t)
	out, err := testenv.RunUnprivileged(t, []string{"-test.run", "^(TestFilterDeniesEachCall|TestTheFilterIsWhatDenies|TestControlWithoutFilter|TestFilterAllowsOrdinaryCalls|TestExtraDenyInKernel|TestFileIsFreshEachTime|TestWorkloadsUnderFilter)$", "-test.count=1", "-test.v"})
	require.NoError(t, err, "the seccomp tests failed as an unprivileged user")
	require.Contains(t, out, "--- PASS: TestWorkloadsUnderFilter/go_build")
	if !allowSkip() {
		require.NotContains(t, out, "--- SKIP", "a test skipped as an unprivileged user")
	}
}

// BenchmarkBwrapTrue runs /bin/true in bwrap without and with the filter
// (a fresh memfd per run, as local mode would): compare the two ns/op.
func BenchmarkBwrapTrue(b *testing.B) {
	bwrap := requireBwrap(b)
	prog := program(b, Options{})
	for _, withFilter := range []bool{false, true} {
		name := "bare"
		if withFilter {
			name = "seccomp"
		}
		b.Run(name, func(b *testing.B) {
			args := append(sandboxArgs(withFilter), "--", "/bin/true")
			for b.Loop() {
				cmd := exec.Command(bwrap, args...)
				if withFilter {
					f, err := File(prog)
					if err != nil {
						b.Fatal(err)
					}
					cmd.ExtraFiles = []*os.File{f}
					err = cmd.Run()
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEveryRuleHasAProbe keeps the kernel tests complete: each call the
// filter denies on this architecture has a probe above.
func TestEveryRuleHasAProbe(t *testing.T) {
	tgt, ok := targets[runtime.GOARCH]
	if !ok {
		t.Skipf("no filter for %s", runtime.GOARCH)
	}
	names := append(DefaultDeny(), "socket", "socketpair", "personality", "clone", "clone3")
	for _, n := range names {
		if _, exists := tgt.info.SyscallNames[n]; !exists {
			continue
		}
		found := false
		for _, p := range probesFor(true) {
			if p.name == n || strings.HasPrefix(p.name, n+"(") {
				found = true
			}
		}
		require.True(t, found, "no kernel probe for %s: add one to probes", n)
	}
}
