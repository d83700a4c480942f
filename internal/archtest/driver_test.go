package archtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	userPkg    = module + "sagents/sandbox"
	driverPkg  = userPkg + "/driver"
	hostkitPkg = userPkg + "/internal/hostkit"
)

// under reports whether path is dir or a package below it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// hostkitUser reports whether path may import the host toolkit: the
// drivers (providers/...), the session daemon and the contract suite.
func hostkitUser(path string) bool {
	for _, d := range []string{"providers", "sessiond", "sandboxtest", "internal"} {
		if under(path, userPkg+"/"+d) {
			return true
		}
	}
	return false
}

// driverSeamViolation says why the import of imp by from breaks the seam
// between the user's package and the drivers' (ARCHITECTURE.md), "" when
// it does not:
//   - sagents/sandbox/driver imports nothing of sagents/sandbox (the user's
//     package imports it, never the reverse), nor a driver, nor the host
//     toolkit;
//   - the host toolkit (sandbox/internal/hostkit) imports driver, never the
//     user's package or a driver;
//   - only drivers, the session daemon and the contract suite import the
//     host toolkit: not the user's package, nor driver.
func driverSeamViolation(from, imp string) string {
	switch {
	case under(from, driverPkg) && under(imp, userPkg) && !under(imp, driverPkg):
		return "package driver imports only what lies below sagents/sandbox"
	case under(from, hostkitPkg) && under(imp, userPkg) && !under(imp, driverPkg) && !under(imp, hostkitPkg):
		return "the host toolkit imports driver only, never the user's package or a driver"
	case under(imp, hostkitPkg) && !hostkitUser(from):
		return "only drivers, sessiond and sandboxtest use the host toolkit"
	}
	return ""
}

// driverSeamErrors checks every import of pkgs; seen counts the packages
// of the seam's three sides it met.
func driverSeamErrors(pkgs []pkg) (errs []string, seen map[string]int) {
	seen = map[string]int{}
	for _, p := range pkgs {
		for _, side := range []string{driverPkg, hostkitPkg, userPkg} {
			if p.ImportPath == side {
				seen[side]++
			}
		}
		for _, imp := range p.Imports {
			if why := driverSeamViolation(p.ImportPath, imp); why != "" {
				errs = append(errs, strings.TrimPrefix(p.ImportPath, module)+" imports "+strings.TrimPrefix(imp, module)+": "+why)
			}
		}
	}
	return errs, seen
}

// TestDriverSeam: the user's package, package driver and the host toolkit
// import each other only along the seam (driverSeamViolation).
func TestDriverSeam(t *testing.T) {
	errs, seen := driverSeamErrors(list(t, "./..."))
	assert.Empty(t, errs)
	for _, side := range []string{driverPkg, hostkitPkg, userPkg} {
		require.Equal(t, 1, seen[side], "%s not listed: the check would see nothing", side)
	}
}

// TestDriverSeamControl feeds the check a synthetic import graph in which
// each rule is broken once, beside imports that are allowed: every
// violation is found, and only those.
func TestDriverSeamControl(t *testing.T) {
	local := userPkg + "/providers/local"
	pkgs := []pkg{
		{ImportPath: driverPkg, Imports: []string{"context", module + "internal/registry", userPkg}},
		{ImportPath: driverPkg + "/x", Imports: []string{hostkitPkg}},
		{ImportPath: hostkitPkg, Imports: []string{driverPkg, userPkg, local}},
		{ImportPath: userPkg, Imports: []string{driverPkg, hostkitPkg}},
		{ImportPath: module + "sagents/tools", Imports: []string{userPkg, driverPkg, hostkitPkg}},
		{ImportPath: local, Imports: []string{userPkg, driverPkg, hostkitPkg, local + "/egress"}},
		{ImportPath: userPkg + "/sessiond", Imports: []string{userPkg, driverPkg, hostkitPkg}},
		{ImportPath: module + "cmd/sage", Imports: []string{userPkg, driverPkg, local}},
	}
	errs, seen := driverSeamErrors(pkgs)
	assert.ElementsMatch(t, []string{
		"sagents/sandbox/driver imports sagents/sandbox: package driver imports only what lies below sagents/sandbox",
		"sagents/sandbox/driver/x imports sagents/sandbox/internal/hostkit: package driver imports only what lies below sagents/sandbox",
		"sagents/sandbox/internal/hostkit imports sagents/sandbox: the host toolkit imports driver only, never the user's package or a driver",
		"sagents/sandbox/internal/hostkit imports sagents/sandbox/providers/local: the host toolkit imports driver only, never the user's package or a driver",
		"sagents/sandbox imports sagents/sandbox/internal/hostkit: only drivers, sessiond and sandboxtest use the host toolkit",
		"sagents/tools imports sagents/sandbox/internal/hostkit: only drivers, sessiond and sandboxtest use the host toolkit",
	}, errs)
	assert.Equal(t, map[string]int{driverPkg: 1, hostkitPkg: 1, userPkg: 1}, seen)
}
