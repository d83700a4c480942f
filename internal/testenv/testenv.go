// Package testenv decides what a test does when something it needs from
// the machine (a command, a service, an image) is missing: it fails,
// naming the fix, unless the developer opted in to skipping with
// SAGE_TEST_ALLOW_SKIP=1. `make test` and CI (.ci/run) never set it, so a
// missing dependency can never turn into a silently skipped test there.
// Only tests import this package.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// AllowSkipEnv is the variable that turns missing dependencies into skips.
const AllowSkipEnv = "SAGE_TEST_ALLOW_SKIP"

// SetupFix is the fix for anything .ci/setup.sh installs or starts.
const SetupFix = "run `make setup` (.ci/setup.sh) as root"

// SkipAllowed reports whether SAGE_TEST_ALLOW_SKIP=1 is set.
func SkipAllowed() bool { return os.Getenv(AllowSkipEnv) == "1" }

// Missing stops t because what is unavailable: t.Fatalf naming fix, or
// t.Skipf when skipping is allowed.
func Missing(t testing.TB, what, fix string) {
	t.Helper()
	if SkipAllowed() {
		t.Skipf("%s unavailable (skipped: %s=1); fix: %s", what, AllowSkipEnv, fix)
	}
	t.Fatalf("%s unavailable; fix: %s (or set %s=1 to skip tests that need it)", what, fix, AllowSkipEnv)
}

// Command returns the path of the named command on PATH, or stops t
// through Missing with fix.
func Command(t testing.TB, name, fix string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "command "+name, fix)
	}
	return p
}
