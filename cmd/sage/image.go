package main

import (
	"context"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

func init() {
	register(command{"image", "build the sandbox container image (image build)", runImage},
		subcommand{"build", "build the sage-sandbox image with Docker, no registry needed"})
}

// runImage implements `sage image build`: the sage-sandbox image, FROM
// scratch with this (static) sage binary and a static busybox, built
// through the Docker API with no registry.
func runImage(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage image build", "sage image build [--tag T] [--binary SAGE] [--busybox PATH] [--python PATH|none] [--force]")
	o := dockerbackend.BuildOptions{}
	fs.StringVar(&o.Tag, "tag", orchestrator.DefaultImage, "image `tag`")
	fs.StringVar(&o.SageBinary, "binary", "", "static sage `binary` to put in the image (default: this executable, which must be built with CGO_ENABLED=0)")
	fs.StringVar(&o.Busybox, "busybox", "/bin/busybox", "static busybox `path` (Debian: busybox-static)")
	python := fs.String("python", "auto", "host python3 to copy into the image with its standard library and shared libraries (`path`); auto: /usr/bin/python3 when it exists; none: no Python")
	fs.BoolVar(&o.Force, "force", false, "rebuild even if the image is up to date")
	if code, stop := parseFlags(env, fs, args[1:]); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
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
