package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set with -ldflags "-X main.version=...".
var version = ""

func init() {
	register(command{"version", "print the version, the module's and the source revision it was built from", runVersion})
}

func runVersion(_ context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage version", "sage version")
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	info, _ := debug.ReadBuildInfo()
	writeVersion(env.stdout, info)
	return 0
}

// writeVersion prints "sage VERSION (GO, OS/ARCH)", then the module and
// the VCS revision, time and modified flag when the build recorded them.
func writeVersion(w io.Writer, info *debug.BuildInfo) {
	fmt.Fprintf(w, "sage %s (%s, %s/%s)\n", versionOf(info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if info == nil {
		return
	}
	fmt.Fprintf(w, "module:   %s %s\n", info.Main.Path, info.Main.Version)
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			fmt.Fprintf(w, "revision: %s\n", s.Value)
		case "vcs.time":
			fmt.Fprintf(w, "time:     %s\n", s.Value)
		case "vcs.modified":
			fmt.Fprintf(w, "modified: %s\n", s.Value)
		}
	}
}

func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

// versionOf is -X main.version, else the module version, with the short
// VCS revision added to a development build's "(devel)".
func versionOf(info *debug.BuildInfo) string {
	if version != "" {
		return version
	}
	if info == nil {
		return "unknown"
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" {
		return v // a module or pseudo-version already names the revision
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
