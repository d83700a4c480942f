package dockerbackend

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// imageLabel holds the sha256 of the image's build context, so a build
// with the same binaries is skipped.
const imageLabel = "sage.sandbox.context-sha256"

// BuildOptions configure BuildImage.
type BuildOptions struct {
	// Tag names the image (default orchestrator.DefaultImage, sage-sandbox:dev).
	Tag string
	// SageBinary is a statically linked sage for linux (CGO_ENABLED=0).
	SageBinary string
	// Busybox is a static busybox (default /bin/busybox, from Debian's
	// busybox-static).
	Busybox string
	// Python is a host python3 copied into the image with its standard
	// library and shared libraries (Debian's /usr/bin/python3); empty
	// leaves Python out.
	Python string
	// Force rebuilds even if an image with the same context exists.
	Force bool
	// Progress receives the build's output (nil: discarded). ProgressFd
	// and ProgressTerminal let it draw progress bars on a terminal.
	Progress         io.Writer
	ProgressFd       uintptr
	ProgressTerminal bool
}

// sandboxDockerfile is the sandbox image's recipe. sandboxd runs in passthrough
// mode: there is no bwrap inside a container, and the container is the
// isolation boundary. It listens on all interfaces of the container's
// network namespace, which only reaches the host through the port
// published on 127.0.0.1, and requires the bearer token given in
// SAGE_SANDBOXD_TOKEN (sandboxd refuses to start off loopback without
// one). SAGE_SERVER_PROCESS=0 states that the passthrough refusal meant
// for host servers does not apply here.
const sandboxDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/bin HOME=/root SAGE_HOME=/var/lib/sage SAGE_SERVER_PROCESS=0 TMPDIR=/tmp
EXPOSE 8080
WORKDIR /mnt/user-data/workspace
ENTRYPOINT ["/bin/sage", "sandboxd", "--listen", "0.0.0.0:8080", "--mode", "passthrough", "--workspace", "/mnt/user-data/workspace", "--shutdown-grace", "2s"]
`

// BuildImage builds the sandbox image through the Docker API from a tar
// context assembled here (no registry, no docker CLI). It returns
// built=false when an image with the same context hash already exists.
func BuildImage(ctx context.Context, cli *client.Client, o BuildOptions) (built bool, err error) {
	if err := o.defaults(); err != nil {
		return false, err
	}
	tarball, sum, err := buildContext(o)
	if err != nil {
		return false, err
	}
	if !o.Force && imageHasLabel(ctx, cli, o.Tag, sum) {
		fmt.Fprintf(o.Progress, "image %s is up to date (%s=%s)\n", o.Tag, imageLabel, sum[:12])
		return false, nil
	}
	err = buildTagged(ctx, cli, o.Tag, sum, tarball, func(r io.Reader) error {
		return jsonmessage.DisplayJSONMessagesStream(r, o.Progress, o.ProgressFd, o.ProgressTerminal, nil)
	})
	return err == nil, err
}

func (o *BuildOptions) defaults() error {
	if o.Tag == "" {
		o.Tag = "sage-sandbox:dev"
	}
	if o.Busybox == "" {
		o.Busybox = "/bin/busybox"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.SageBinary == "" {
		return errors.New("image: the path of a static sage binary is required")
	}
	if err := checkStatic(o.SageBinary); err != nil {
		return err
	}
	if err := checkStatic(o.Busybox); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w; fix: install a static busybox (Debian: apt-get install busybox-static), or name one with --busybox PATH", err)
		}
		return err
	}
	return nil
}

// checkStatic returns an error unless path is a statically linked ELF
// executable (no program interpreter), which a FROM scratch image needs.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("image: %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("image: %s is dynamically linked; build it with CGO_ENABLED=0 (sage) or install busybox-static", path)
		}
	}
	return nil
}

// buildTagged builds the context tarball (its Dockerfile at the root) as
// tag, labelled with sum, and hands the progress stream to display.
func buildTagged(ctx context.Context, cli *client.Client, tag, sum string, tarball []byte, display func(io.Reader) error) error {
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(tarball), build.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1,
		Labels: map[string]string{imageLabel: sum}, Dockerfile: "Dockerfile"})
	if err != nil {
		return fmt.Errorf("docker: build %s: %w", tag, err)
	}
	defer resp.Body.Close()
	if err := display(resp.Body); err != nil {
		return fmt.Errorf("docker: build %s: %w", tag, err)
	}
	return nil
}

func imageHasLabel(ctx context.Context, cli *client.Client, tag, sum string) bool {
	img, err := cli.ImageInspect(ctx, tag)
	if err != nil || cerrdefs.IsNotFound(err) || img.Config == nil {
		return false
	}
	return img.Config.Labels[imageLabel] == sum
}

// buildContext assembles the tar: the Dockerfile and rootfs/ with
// /bin/sage, /bin/busybox, a symlink per busybox applet, and the
// directories sandboxd and the mounts need. It returns the tar and the
// sha256 of its content.
func buildContext(o BuildOptions) ([]byte, string, error) {
	applets, err := busyboxApplets(o.Busybox)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := sha256.New()
	add := func(hdr *tar.Header, body []byte) error {
		hdr.Format = tar.FormatPAX
		fmt.Fprintf(h, "%s %d %o %s\n", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Linkname)
		h.Write(body)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(sandboxDockerfile)), Typeflag: tar.TypeReg}, []byte(sandboxDockerfile)); err != nil {
		return nil, "", err
	}
	if err := addRootfs(add, o, applets); err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil)), nil
}

func addRootfs(add func(*tar.Header, []byte) error, o BuildOptions, applets []string) error {
	dirs := []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"root", 0o700}, {"tmp", 0o1777}, {"var", 0o755}, {"var/lib", 0o755}, {"var/lib/sage", 0o755},
		{"etc", 0o755}, {"mnt", 0o755}, {"mnt/user-data", 0o755}, {"mnt/user-data/workspace", 0o755},
		{"mnt/user-data/uploads", 0o755}, {"mnt/user-data/outputs", 0o755}, {"proc", 0o555}, {"dev", 0o755}, {"sys", 0o555}}
	for _, d := range dirs {
		if err := add(&tar.Header{Name: "rootfs/" + d.name + "/", Mode: d.mode, Typeflag: tar.TypeDir}, nil); err != nil {
			return err
		}
	}
	etc := map[string]string{"passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"group": "root:x:0:\nnobody:x:65534:\n"}
	for _, n := range []string{"group", "passwd"} {
		if err := add(&tar.Header{Name: "rootfs/etc/" + n, Mode: 0o644, Size: int64(len(etc[n])), Typeflag: tar.TypeReg}, []byte(etc[n])); err != nil {
			return err
		}
	}
	for _, f := range []struct{ src, name string }{{o.SageBinary, "sage"}, {o.Busybox, "busybox"}} {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		if err := add(&tar.Header{Name: "rootfs/bin/" + f.name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}, data); err != nil {
			return err
		}
	}
	for _, a := range applets {
		if err := add(&tar.Header{Name: "rootfs/bin/" + a, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: "busybox"}, nil); err != nil {
			return err
		}
	}
	if o.Python != "" {
		return addPython(add, o.Python)
	}
	return nil
}

// busyboxApplets lists the applets to link in /bin (busybox --list).
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("image: %s --list: %w", busybox, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && a != "sage" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	return applets, nil
}
