//go:build linux

// Command sage-supervisor is local mode's session supervisor on its own:
// the program a session sandbox runs as its init when it is found (next
// to the sage binary, or named by local.SessionOptions.Supervisor),
// instead of re-executing the whole linking program. It links only the
// supervisor package, so it starts in a fraction of the time and maps
// far fewer pages. See package supervisor for the protocol.
package main

import (
	"os"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

func main() { os.Exit(supervisor.Main(os.Args[1:])) }
