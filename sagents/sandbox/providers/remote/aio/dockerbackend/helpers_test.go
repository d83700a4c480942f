package dockerbackend_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// Child processes: the test binary re-executes itself with childEnv set.
const (
	childEnv  = "SAGE_AIO_TEST_CHILD"
	prefixEnv = "SAGE_AIO_TEST_PREFIX"
	homeEnv   = "SAGE_AIO_TEST_HOME"
	threadEnv = "SAGE_AIO_TEST_THREAD"
	storeEnv  = "SAGE_AIO_TEST_STORE" // "" (file) or a redis:// URL
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}

// unavailable fails (or skips with SAGE_TEST_ALLOW_SKIP=1): Docker, Redis
// and the sandbox image are set up by `make test`.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, fmt.Sprintf(format, args...), testenv.SetupFix+" (Docker Engine running; the image: make image)")
}

var (
	dockerOnce sync.Once
	dockerCli  *client.Client
	dockerErr  error
	imageOnce  sync.Once
	imageErr   error
)

func dockerClient(t testing.TB) *client.Client {
	t.Helper()
	dockerOnce.Do(func() {
		dockerCli, dockerErr = dockerbackend.NewClient()
		if dockerErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, dockerErr = dockerCli.Ping(ctx)
		}
	})
	if dockerErr != nil {
		unavailable(t, "Docker Engine unavailable: %v", dockerErr)
	}
	ensureImage(t)
	return dockerCli
}

// ensureImage builds sage-sandbox:dev, the full image, from this tree's
// sage (seconds on top of the Debian base setup made; the first time on
// a machine without it, debootstrap's minutes), so the tests run the code
// under test.
func ensureImage(t testing.TB) {
	t.Helper()
	imageOnce.Do(func() {
		bin, err := testenv.SageBinary()
		if err != nil {
			imageErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dockerbackend.RootfsTimeout+5*time.Minute)
		defer cancel()
		var progress strings.Builder
		_, imageErr = dockerbackend.BuildFullImage(ctx, dockerCli, dockerbackend.FullOptions{SageBinary: bin, Progress: &progress})
		if imageErr != nil {
			imageErr = fmt.Errorf("%w\n%s", imageErr, progress.String())
		}
	})
	if imageErr != nil {
		if strings.Contains(imageErr.Error(), "debootstrap") {
			unavailable(t, "cannot build the sandbox image: %v", imageErr)
		}
		t.Fatalf("build sandbox image: %v", imageErr)
	}
}

// fixture is one test's world: a unique container prefix (removed by
// label at cleanup) and a SAGE_HOME.
type fixture struct {
	cli    *client.Client
	prefix string
	home   string
	store  string // "" or a redis URL
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cli := dockerClient(t)
	f := &fixture{cli: cli, prefix: fmt.Sprintf("sagetest-%d-%s", os.Getpid(), strings.ToLower(randomSuffix(t))), home: t.TempDir()}
	t.Cleanup(func() { f.removeAll(t) })
	return f
}

func randomSuffix(t *testing.T) string {
	return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
}

func (f *fixture) removeAll(t testing.TB) {
	b := f.backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.RemoveAll(ctx); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

func (f *fixture) backend(t testing.TB) *dockerbackend.Backend {
	b, err := dockerbackend.New(dockerbackend.Options{Client: f.cli, Prefix: f.prefix})
	require.NoError(t, err)
	return b
}

func (f *fixture) stateStore(t testing.TB) orchestrator.StateStore {
	if f.store == "" {
		return orchestrator.NewFileStore(f.home)
	}
	s, err := redisstore.Open(f.store, redisstore.Options{Prefix: "sage:test:" + f.prefix + ":"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func (f *fixture) provider(t testing.TB, mod ...func(*orchestrator.ProviderOptions)) *orchestrator.Provider {
	t.Helper()
	o := orchestrator.ProviderOptions{Backend: f.backend(t), Store: f.stateStore(t), Home: f.home, ReadyTimeout: 20 * time.Second}
	for _, m := range mod {
		m(&o)
	}
	p, err := orchestrator.NewProvider(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// containers lists every container (running or not) with the prefix.
func (f *fixture) containers(t testing.TB) []container.Summary {
	t.Helper()
	cs, err := f.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+f.prefix))})
	require.NoError(t, err)
	return cs
}

// killChildAt starts a child in mode for thread and kills it (SIGKILL)
// once it printed the line want.
func (f *fixture) killChildAt(t *testing.T, mode, thread, want string) {
	t.Helper()
	cmd, out := f.child(t, mode, thread)
	require.Equal(t, want, readLine(t, out))
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// child starts a child process in mode; it returns the command and a
// reader of its stdout.
func (f *fixture) child(t *testing.T, mode, thread string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, prefixEnv+"="+f.prefix, homeEnv+"="+f.home,
		threadEnv+"="+thread, storeEnv+"="+f.store)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatalf("child: %v", err)
	}
	return strings.TrimSpace(line)
}
