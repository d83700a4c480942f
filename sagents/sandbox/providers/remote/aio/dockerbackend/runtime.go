package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// errUnknownRuntime is wrapped by NewChecked when the engine does not
// have the runtime Options.Runtime names.
var errUnknownRuntime = errors.New("docker: unknown runtime")

// NewChecked is New that first asks the engine whether it has
// Options.Runtime, so a missing runtime fails here, naming the fix,
// rather than at the first sandbox (and never falls back to the default
// runtime).
func NewChecked(ctx context.Context, o Options) (*Backend, error) {
	b, err := New(o)
	if err != nil {
		return nil, err
	}
	if o.Runtime == "" {
		return b, nil
	}
	info, err := b.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker: runtime %q: cannot ask the engine which runtimes it has: %w", o.Runtime, err)
	}
	have := slices.Sorted(maps.Keys(info.Runtimes))
	if !slices.Contains(have, o.Runtime) {
		return nil, fmt.Errorf(`%w %q: the engine has %s; fix: add {"runtimes": {%q: {"path": "/usr/local/bin/%s"}}} to /etc/docker/daemon.json and send dockerd SIGHUP (kill -HUP $(pidof dockerd)); for runsc, bash .ci/setup.d/50-runsc.sh does both`,
			errUnknownRuntime, o.Runtime, strings.Join(have, ", "), o.Runtime, o.Runtime)
	}
	return b, nil
}
