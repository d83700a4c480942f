package main

import (
	"context"
	"flag"
	"os"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

func init() {
	register(command{"image", "build the sandbox container image (image build)", runImage},
		subcommand{"build", "build the sage-sandbox image with Docker, no registry needed"})
}

// MinimalImage is the tag of `sage image build --minimal`.
const MinimalImage = "sage-sandbox:minimal"

// runImage implements `sage image build`: by default the full image
// (Debian with python3, venv, pip, git, curl, coreutils and bash, plus
// this static sage), from a Dockerfile FROM --base where a registry is
// reachable, else from a debootstrap root file system cached under
// ~/.cache/sage/image; with --minimal the FROM scratch image of a static
// sage and busybox (and the host's python3).
func runImage(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage image build", "sage image build [--minimal] [--tag T] [--binary SAGE] [--from auto|dockerfile|debootstrap] [--base IMAGE] [--suite S] [--mirror URL] [--package P]... [--busybox PATH] [--python PATH|none] [--force]")
	o := dockerbackend.BuildOptions{}
	fs.StringVar(&o.Tag, "tag", orchestrator.DefaultImage, "image `tag` (default "+MinimalImage+" with --minimal)")
	minimal := fs.Bool("minimal", false, "build the small FROM scratch image instead: static sage, busybox and the host's python3 (seconds; no pip, git or curl)")
	fs.StringVar(&o.SageBinary, "binary", "", "static sage `binary` to put in the image (default: this executable, which must be built with CGO_ENABLED=0)")
	var full dockerbackend.FullOptions
	fs.StringVar(&full.From, "from", dockerbackend.FromAuto, "where Debian comes from: `auto` (the base image if present or pullable, else debootstrap), dockerfile or debootstrap")
	fs.StringVar(&full.Base, "base", "", "base `image` of the Dockerfile way (default debian:SUITE-slim)")
	fs.StringVar(&full.Rootfs.Suite, "suite", "", "Debian `suite` (default: this machine's, else bookworm)")
	fs.StringVar(&full.Rootfs.Mirror, "mirror", "", "Debian mirror `URL` for debootstrap (default: the one this machine's apt uses)")
	var pkgs stringList
	fs.Var(&pkgs, "package", "Debian `package` to install (repeatable; default "+strings.Join(dockerbackend.DefaultPackages, " ")+")")
	fs.StringVar(&o.Busybox, "busybox", "/bin/busybox", "static busybox `path` (--minimal; Debian: busybox-static)")
	python := fs.String("python", "auto", "host python3 to copy into the --minimal image with its standard library and shared libraries (`path`); auto: /usr/bin/python3 when it exists; none: no Python")
	fs.BoolVar(&o.Force, "force", false, "rebuild even if the image is up to date")
	if code, stop := parseFlags(env, fs, args[1:]); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	switch full.From {
	case dockerbackend.FromAuto, dockerbackend.FromDockerfile, dockerbackend.FromDebootstrap:
	default:
		return usageError(env, fs.Name(), "--from %q: want auto, dockerfile or debootstrap", full.From)
	}
	if *minimal && !flagSet(fs, "tag") {
		o.Tag = MinimalImage
	}
	switch *python {
	case "none", "":
	case "auto":
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			o.Python = "/usr/bin/python3"
		}
	default:
		o.Python = *python
	}
	if o.SageBinary == "" {
		self, err := os.Executable()
		if err != nil {
			return fail(env, exitSandboxError, err)
		}
		o.SageBinary = self
	}
	cli, err := dockerbackend.NewClient()
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer cli.Close()
	if !*minimal {
		full.Tag, full.SageBinary, full.Force, full.Progress, full.Rootfs.Packages = o.Tag, o.SageBinary, o.Force, env.stdout, pkgs
		if _, err := dockerbackend.BuildFullImage(ctx, cli, full); err != nil {
			return fail(env, exitSandboxError, err)
		}
		return 0
	}
	o.Progress = env.stdout
	if f, ok := env.stdout.(*os.File); ok {
		fi, serr := f.Stat()
		o.ProgressFd, o.ProgressTerminal = f.Fd(), serr == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	if _, err := dockerbackend.BuildImage(ctx, cli, o); err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs interface{ Visit(func(*flag.Flag)) }, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
