package faulttest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
)

// Images this test builds from the tree (and leaves, as the sandbox
// image is left: a later run rebuilds them in seconds).
const (
	sandboxImage = "sage-faulttest:sandbox"
	hostImage    = "sage-faulttest:host"
	redisImage   = "sage-faulttest:redis"
)

// contextTar is a Docker build context: a Dockerfile and files at paths.
type contextTar struct {
	buf bytes.Buffer
	tw  *tar.Writer
}

func newContext(dockerfile string) *contextTar {
	c := &contextTar{}
	c.tw = tar.NewWriter(&c.buf)
	c.add("Dockerfile", []byte(dockerfile), 0o644)
	return c
}

func (c *contextTar) add(name string, data []byte, mode int64) {
	_ = c.tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	_, _ = c.tw.Write(data)
}

func (c *contextTar) dir(name string) {
	_ = c.tw.WriteHeader(&tar.Header{Name: name + "/", Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
}

// file adds the content of host file src (symlinks followed) at dst.
func (c *contextTar) file(t *testing.T, src, dst string) {
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	fi, err := os.Stat(src)
	require.NoError(t, err)
	c.add(dst, data, int64(fi.Mode().Perm()))
}

func (c *contextTar) build(t *testing.T, cli *client.Client, tag string) {
	t.Helper()
	require.NoError(t, c.tw.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(c.buf.Bytes()), build.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1, Dockerfile: "Dockerfile"})
	require.NoError(t, err, "build %s", tag)
	defer resp.Body.Close()
	var out strings.Builder
	require.NoError(t, jsonmessage.DisplayJSONMessagesStream(resp.Body, &out, 0, false, nil), "build %s:\n%s", tag, out.String())
}

// buildImages builds the sandbox image (the tree's sage, busybox), the
// host image (FROM scratch, the faulthost binary) and the Redis image
// (FROM scratch, Debian's redis-server with the libraries it links).
func buildImages(t *testing.T, cli *client.Client) {
	t.Helper()
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", testenv.SetupFix+" (.ci/setup.d/15-packages-test.sh installs it)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "/bin/busybox (busybox-static)", testenv.SetupFix)
	}
	sage, err := testenv.SageBinary()
	require.NoError(t, err)
	host, err := testenv.Build("./sagents/sandbox/providers/remote/aio/faulttest/faulthost", "faulthost")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err = dockerbackend.BuildImage(ctx, cli, dockerbackend.BuildOptions{Tag: sandboxImage, SageBinary: sage})
	require.NoError(t, err)

	hc := newContext("FROM scratch\nCOPY faulthost /faulthost\nENTRYPOINT [\"/faulthost\", \"host\"]\n")
	hc.file(t, host, "faulthost")
	hc.build(t, cli, hostImage)

	rc := newContext(`FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/bin/redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--port", "6379", "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--dir", "/data"]
`)
	rc.dir("rootfs")
	rc.dir("rootfs/data")
	rc.file(t, redis, "rootfs/usr/bin/redis-server")
	for _, lib := range linkedLibraries(t, redis) {
		rc.file(t, lib, "rootfs"+lib)
	}
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		rc.file(t, "/etc/ld.so.cache", "rootfs/etc/ld.so.cache")
	}
	rc.build(t, cli, redisImage)
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// linkedLibraries lists, from ldd, the shared libraries bin loads and its
// program interpreter.
func linkedLibraries(t *testing.T, bin string) []string {
	out, err := exec.Command("ldd", bin).Output()
	require.NoError(t, err, "ldd %s", bin)
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := lddLine.FindStringSubmatch(line); m != nil {
			libs = append(libs, filepath.Clean(m[1]))
		}
	}
	require.NotEmpty(t, libs, "ldd %s printed no library:\n%s", bin, out)
	return libs
}

// readLogs returns a container's output (for a failure message).
func readLogs(cli *client.Client, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := cli.ContainerLogs(ctx, id, containerLogOptions())
	if err != nil {
		return fmt.Sprintf("(logs: %v)", err)
	}
	defer rc.Close()
	var b bytes.Buffer
	_, _ = stdcopy.StdCopy(&b, &b, io.LimitReader(rc, 64<<10))
	return b.String()
}
