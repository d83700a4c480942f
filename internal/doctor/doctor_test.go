package doctor

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

func fakeProc(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return root
}

func byName(r Report, name string) Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

func TestBwrapMissingIsRequiredAndExplained(t *testing.T) {
	e := Env{GOOS: "linux", ProcRoot: fakeProc(t, nil), SysRoot: fakeProc(t, nil),
		DockerHost: "unix:///nonexistent.sock", RedisAddr: "127.0.0.1:1", OTLPEndpoint: "http://127.0.0.1:1",
		LookPath: func(string) (string, error) { return "", errors.New("not found") }}
	r := Run(context.Background(), e)
	c := byName(r, "bwrap")
	assert.Equal(t, Missing, c.Status)
	assert.Contains(t, c.Fix, "apt-get install bubblewrap")
	assert.False(t, r.OK())
	for _, name := range []string{"docker", "redis", "otlp endpoint"} {
		assert.Equal(t, Missing, byName(r, name).Status, name)
		assert.NotEmpty(t, byName(r, name).Fix, name)
	}
	assert.Equal(t, NA, byName(r, "seatbelt").Status)
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	assert.Contains(t, buf.String(), "fix: install bubblewrap")
}

func TestUserNamespacesDisabled(t *testing.T) {
	e := Env{GOOS: "linux", ProcRoot: fakeProc(t, map[string]string{"sys/user/max_user_namespaces": "0\n"}),
		LookPath: func(string) (string, error) { return "/usr/bin/bwrap", nil }}
	c := checkUserNS(context.Background(), e.withDefaults())
	assert.Equal(t, Missing, c.Status)
	assert.Contains(t, c.Fix, "max_user_namespaces")
}

func TestUserNamespacesTriedWithBwrap(t *testing.T) {
	var ran []string
	e := Env{GOOS: "linux", ProcRoot: fakeProc(t, nil),
		LookPath: func(string) (string, error) { return "/usr/bin/bwrap", nil },
		Output: func(_ context.Context, name string, args ...string) ([]byte, error) {
			ran = append(ran, name)
			return []byte("bwrap: No permissions to creating new namespace\n"), errors.New("exit status 1")
		}}
	c := checkUserNS(context.Background(), e.withDefaults())
	assert.Equal(t, Missing, c.Status)
	assert.Contains(t, c.Detail, "No permissions")
	assert.Equal(t, []string{"/usr/bin/bwrap"}, ran)
}

func TestAppArmorRestriction(t *testing.T) {
	e := Env{GOOS: "linux", ProcRoot: fakeProc(t, map[string]string{"sys/kernel/apparmor_restrict_unprivileged_userns": "1"})}
	c := checkAppArmor(context.Background(), e.withDefaults())
	assert.Equal(t, Warn, c.Status)
	assert.Contains(t, c.Fix, "apparmor_restrict_unprivileged_userns=0")
}

func TestCgroup(t *testing.T) {
	sys := fakeProc(t, map[string]string{"fs/cgroup/cgroup.controllers": "cpu memory pids", "fs/cgroup/user.slice/x": ""})
	proc := fakeProc(t, map[string]string{"self/cgroup": "0::/user.slice\n"})
	c := checkCgroup(context.Background(), Env{GOOS: "linux", SysRoot: sys, ProcRoot: proc}.withDefaults())
	assert.Equal(t, OK, c.Status, c.Detail)
	assert.Contains(t, c.Detail, "v2")

	v1sys := fakeProc(t, map[string]string{"fs/cgroup/pids/x": "", "fs/cgroup/memory/app/x": ""})
	v1proc := fakeProc(t, map[string]string{"self/cgroup": "8:pids:/\n4:memory:/app\n0::/\n"})
	c = checkCgroup(context.Background(), Env{GOOS: "linux", SysRoot: v1sys, ProcRoot: v1proc}.withDefaults())
	assert.Equal(t, OK, c.Status, c.Detail)
	assert.Contains(t, c.Detail, "pids, memory")

	c = checkCgroup(context.Background(), Env{GOOS: "linux", SysRoot: fakeProc(t, nil), ProcRoot: proc}.withDefaults())
	if os.Geteuid() == 0 {
		assert.Equal(t, Missing, c.Status)
		assert.Contains(t, c.Fix, "pids_limit: -1")
	} else {
		assert.Equal(t, Warn, c.Status)
	}
}

func TestServicesReachable(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "docker.sock")
	ul, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.50")
		w.Write([]byte("OK"))
	})}
	go srv.Serve(ul)
	defer srv.Close()

	rl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	testenv.ServeConns(t, rl, func(c net.Conn) {
		c.Read(make([]byte, 64))
		c.Write([]byte("+PONG\r\n"))
	})
	e := Env{GOOS: "linux", DockerHost: "unix://" + sock, RedisAddr: rl.Addr().String(),
		OTLPEndpoint: "http://" + rl.Addr().String()}.withDefaults()
	ctx := context.Background()
	assert.Equal(t, OK, checkDocker(ctx, e).Status, checkDocker(ctx, e).Detail)
	assert.Contains(t, checkDocker(ctx, e).Detail, "1.50")
	assert.Equal(t, OK, checkRedis(ctx, e).Status)
	assert.Equal(t, OK, checkOTLP(ctx, e).Status)
}

// On macOS the seatbelt check carries the limits caveat: the pids limit
// (ulimit -u) is not per sandbox there.
func TestSeatbeltReportsThePidsCaveat(t *testing.T) {
	c := checkSeatbelt(context.Background(), Env{GOOS: "darwin"}.withDefaults())
	assert.Contains(t, c.Detail, "pids limit not enforced per sandbox on macOS")
	assert.True(t, c.Required)
}
