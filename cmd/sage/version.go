package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set with -ldflags "-X main.version=...".
var version = ""

func init() {
	register(command{"version", "print the version", func(_ context.Context, env *cliEnv, _ []string) int {
		fmt.Fprintf(env.stdout, "sage %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	}})
}

func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
