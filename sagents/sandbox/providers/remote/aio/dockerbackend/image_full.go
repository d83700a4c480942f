package dockerbackend

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Where BuildFullImage gets its Debian from.
const (
	// FromAuto uses FromDockerfile when the base image is present or can
	// be pulled, else FromDebootstrap.
	FromAuto = "auto"
	// FromDockerfile builds FROM Base and installs the packages with
	// apt-get in a RUN step (needs a registry, or Base present locally).
	FromDockerfile = "dockerfile"
	// FromDebootstrap makes the root file system with debootstrap from
	// the Debian mirror (no registry), imports it as
	// sage-sandbox-base:<key> and builds on it.
	FromDebootstrap = "debootstrap"
)

// baseImageRepo names the images imported from debootstrap tarballs; the
// tag is the first 16 hex digits of RootfsOptions.cacheKey.
const baseImageRepo = "sage-sandbox-base"

// pullTimeout bounds the pull of the base image in FromAuto.
const pullTimeout = 2 * time.Minute

// FullOptions configure BuildFullImage.
type FullOptions struct {
	// Tag names the image (default sage-sandbox:dev).
	Tag string
	// SageBinary is a statically linked sage for linux (CGO_ENABLED=0).
	SageBinary string
	// From is FromAuto (default), FromDockerfile or FromDebootstrap.
	From string
	// Base is the image FromDockerfile builds on (default
	// debian:<suite>-slim).
	Base string
	// Rootfs says which Debian and packages (both ways).
	Rootfs RootfsOptions
	// Force rebuilds the last step even if the image is up to date.
	Force bool
	// Progress receives one line per step with its duration (nil:
	// discarded).
	Progress io.Writer
}

// fullDockerfile is the recipe on top of the Debian base: sage at
// /usr/local/bin/sage running sandboxd in passthrough mode, as in
// sandboxDockerfile (the minimal image).
const fullDockerfile = `FROM %s
%sCOPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SAGE_HOME=/var/lib/sage SAGE_SERVER_PROCESS=0 TMPDIR=/tmp LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1
EXPOSE 8080
WORKDIR /mnt/user-data/workspace
ENTRYPOINT ["/usr/local/bin/sage", "sandboxd", "--listen", "0.0.0.0:8080", "--mode", "passthrough", "--workspace", "/mnt/user-data/workspace", "--shutdown-grace", "2s"]
`

// BuildFullImage builds the sandbox image with a Debian userland: python3
// with venv and pip, git, curl, coreutils and bash (RootfsOptions.Packages),
// plus sage. With no registry it makes the Debian root file system with
// debootstrap once per machine (minutes, cached under ~/.cache/sage/image
// by the hash of suite, mirror and packages); later builds only add the
// sage binary (seconds), and none happens when the image's label holds
// the same hash. It returns built=false when the image was up to date.
func BuildFullImage(ctx context.Context, cli *client.Client, o FullOptions) (built bool, err error) {
	if o.Tag == "" {
		o.Tag = "sage-sandbox:dev"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.From == "" {
		o.From = FromAuto
	}
	if err := o.Rootfs.defaults(); err != nil {
		return false, err
	}
	if o.Base == "" {
		o.Base = "debian:" + o.Rootfs.Suite + "-slim"
	}
	if o.SageBinary == "" {
		return false, errors.New("image: the path of a static sage binary is required")
	}
	if err := checkStatic(o.SageBinary); err != nil {
		return false, err
	}
	step := stepper(o.Progress)
	base, install := o.Base, true
	switch o.From {
	case FromAuto, FromDockerfile:
		err := ensureBase(ctx, cli, o.Base, step)
		if err == nil {
			break
		}
		if o.From == FromDockerfile {
			return false, err
		}
		fmt.Fprintf(o.Progress, "image: no %s (%v); making Debian with debootstrap instead\n", o.Base, firstLine(err))
		fallthrough
	case FromDebootstrap:
		if base, err = importRootfs(ctx, cli, o.Rootfs, o.Progress, step); err != nil {
			return false, err
		}
		install = false
	default:
		return false, fmt.Errorf("image: from %q: want auto, dockerfile or debootstrap", o.From)
	}
	baseImg, err := cli.ImageInspect(ctx, base)
	if err != nil {
		return false, fmt.Errorf("docker: inspect %s: %w", base, err)
	}
	run := ""
	if install {
		run = "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " +
			strings.Join(o.Rootfs.Packages, " ") + " && rm -rf /var/lib/apt/lists/*\n"
	}
	tarball, sum, err := fullContext(fmt.Sprintf(fullDockerfile, base, run), o.SageBinary, baseImg.ID)
	if err != nil {
		return false, err
	}
	if !o.Force && imageHasLabel(ctx, cli, o.Tag, sum) {
		fmt.Fprintf(o.Progress, "image: %s is up to date (%s=%s)\n", o.Tag, imageLabel, sum[:12])
		return false, nil
	}
	done := step(fmt.Sprintf("build %s on %s", o.Tag, base))
	defer done()
	if err := buildTagged(ctx, cli, o.Tag, sum, tarball, displayQuiet); err != nil {
		return false, err
	}
	return true, nil
}

// ensureBase makes sure ref is present, pulling it when it is not.
func ensureBase(ctx context.Context, cli *client.Client, ref string, step func(string) func()) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return nil
	}
	done := step("pull " + ref)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	rc, err := cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("docker: pull %s: %w", ref, err)
	}
	defer rc.Close()
	if err := displayQuiet(rc); err != nil {
		return fmt.Errorf("docker: pull %s: %w", ref, err)
	}
	return nil
}

// baseImage names the image a debootstrap root file system of o is
// imported as (o's defaults applied): baseImageRepo:<key>.
func baseImage(o RootfsOptions) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	return baseImageRepo + ":" + o.cacheKey()[:16], nil
}

// importRootfs returns baseImageRepo:<key>, importing the debootstrap
// tarball (made first when missing) unless the image exists.
func importRootfs(ctx context.Context, cli *client.Client, ro RootfsOptions, progress io.Writer, step func(string) func()) (string, error) {
	ref := baseImageRepo + ":" + ro.cacheKey()[:16]
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	tarPath, err := debootstrapRootfs(ctx, ro, progress)
	if err != nil {
		return "", err
	}
	f, err := os.Open(tarPath)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	done := step("import " + tarPath + " as " + ref)
	defer done()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, ref, image.ImportOptions{
		Message: "debootstrap " + ro.Suite + " from " + ro.Mirror})
	if err != nil {
		return "", fmt.Errorf("docker: import %s: %w", ref, err)
	}
	defer rc.Close()
	if err := displayQuiet(rc); err != nil {
		return "", fmt.Errorf("docker: import %s: %w", ref, err)
	}
	return ref, nil
}

// fullContext is the build context: the Dockerfile, rootfs/ with the
// sage binary and the directories sandboxd and the mounts need. The hash
// covers the context and the base image's id.
func fullContext(dockerfile, sage, baseID string) ([]byte, string, error) {
	data, err := os.ReadFile(sage)
	if err != nil {
		return nil, "", fmt.Errorf("image: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := sha256.New()
	fmt.Fprintf(h, "base %s\n", baseID)
	add := func(name string, mode int64, typ byte, body []byte) error {
		hdr := &tar.Header{Name: name, Mode: mode, Typeflag: typ, Size: int64(len(body)), Format: tar.FormatPAX}
		fmt.Fprintf(h, "%s %d %o\n", name, typ, mode)
		h.Write(body)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	entries := []struct {
		name string
		mode int64
		body []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"rootfs/", 0o755, nil}, {"rootfs/usr/", 0o755, nil},
		{"rootfs/usr/local/", 0o755, nil}, {"rootfs/usr/local/bin/", 0o755, nil}, {"rootfs/usr/local/bin/sage", 0o755, data},
		{"rootfs/var/", 0o755, nil}, {"rootfs/var/lib/", 0o755, nil}, {"rootfs/var/lib/sage/", 0o755, nil},
		{"rootfs/mnt/", 0o755, nil}, {"rootfs/mnt/user-data/", 0o755, nil}, {"rootfs/mnt/user-data/workspace/", 0o755, nil},
		{"rootfs/mnt/user-data/uploads/", 0o755, nil}, {"rootfs/mnt/user-data/outputs/", 0o755, nil}}
	for _, e := range entries {
		typ := byte(tar.TypeReg)
		if strings.HasSuffix(e.name, "/") {
			typ = tar.TypeDir
		}
		if err := add(e.name, e.mode, typ, e.body); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil)), nil
}

// displayQuiet reads a Docker JSON message stream to its end, keeping the
// last 64 KiB of its text for the error of a failed step.
func displayQuiet(r io.Reader) error {
	var last tailBuffer
	if err := jsonmessage.DisplayJSONMessagesStream(r, &last, 0, false, nil); err != nil {
		return fmt.Errorf("%w\n%s", err, last.String())
	}
	return nil
}

type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 64<<10; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// stepper prints "image: STEP ... " when a step starts and its duration
// when it ends.
func stepper(w io.Writer) func(string) func() {
	return func(label string) func() {
		start := time.Now()
		fmt.Fprintf(w, "image: %s ... ", label)
		return func() {
			d := time.Since(start)
			if d < 10*time.Second {
				fmt.Fprintf(w, "%.1fs\n", d.Seconds())
			} else {
				fmt.Fprintf(w, "%s\n", d.Round(time.Second))
			}
		}
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
