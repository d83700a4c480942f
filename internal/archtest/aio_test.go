package archtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const aioPath = module + "sagents/sandbox/providers/remote/aio"

// aioRules says which parts of the aio subtree each aio package may import
// (besides its own subtree): the wire types and client (aioapi) import no
// other part; the driver only aioapi; the orchestrator aioapi and the
// driver; backends and stores only the orchestrator's interfaces and
// aioapi; the server only aioapi.
var aioRules = map[string][]string{
	"aioapi":        {},
	"aiodriver":     {"aioapi"},
	"orchestrator":  {"aioapi", "aiodriver"},
	"dockerbackend": {"aioapi", "orchestrator"},
	"redisstore":    {"orchestrator"},
	"provisioner":   {"aioapi", "orchestrator"},
	"aioserver":     {"aioapi"},
	// the fault test's checker and host program drive the whole stack
	"faulttest": {"aioapi", "aiodriver", "orchestrator", "dockerbackend", "redisstore"},
	"":          {"aioapi", "aiodriver", "orchestrator"}, // the registration
}

// aioPart is the first element of path below aio ("" for aio itself,
// "-" outside the subtree).
func aioPart(path string) string {
	if path == aioPath {
		return ""
	}
	rest, ok := strings.CutPrefix(path, aioPath+"/")
	if !ok {
		return "-"
	}
	part, _, _ := strings.Cut(rest, "/")
	return part
}

func aioImportAllowed(from, imp string) bool {
	fp, ip := aioPart(from), aioPart(imp)
	if ip == "-" || (fp == ip && fp != "") || ip == "internal" {
		return true
	}
	if from == aioPath && ip == "" {
		return true
	}
	rules, ok := aioRules[fp]
	if !ok {
		return false
	}
	for _, r := range rules {
		if r == ip {
			return true
		}
	}
	return false
}

// TestAIOSeams: the aio packages import each other only along the seams
// above, and the API, driver, orchestrator and server link no Docker,
// Redis or Kubernetes package.
func TestAIOSeams(t *testing.T) {
	pkgs := list(t, "./sagents/sandbox/providers/remote/aio/...")
	require.Greater(t, len(pkgs), 7)
	seen := map[string]bool{}
	for _, p := range pkgs {
		fp := aioPart(p.ImportPath)
		seen[fp] = true
		if _, ok := aioRules[fp]; !ok && fp != "internal" {
			t.Errorf("%s: no seam rule for this aio package; add it to aioRules", p.ImportPath)
		}
		for _, imp := range p.Imports {
			assert.True(t, aioImportAllowed(p.ImportPath, imp), "%s imports %s: aio's parts import each other only along the seams (aioRules)",
				strings.TrimPrefix(p.ImportPath, module), strings.TrimPrefix(imp, module))
		}
		switch fp {
		case "aioapi", "aiodriver", "orchestrator", "aioserver", "":
			for _, d := range p.Deps {
				for _, h := range []string{"github.com/docker/", "github.com/redis/", "k8s.io/"} {
					assert.False(t, strings.HasPrefix(d, h), "%s links %s", p.ImportPath, d)
				}
			}
		}
	}
	for part := range aioRules {
		assert.True(t, seen[part], "aio part %q not found: update aioRules", part)
	}
}

// TestAIOSeamsControl proves the rule can fail: the API importing the
// orchestrator, or a backend importing the driver, is refused.
func TestAIOSeamsControl(t *testing.T) {
	assert.False(t, aioImportAllowed(aioPath+"/aioapi", aioPath+"/orchestrator"))
	assert.False(t, aioImportAllowed(aioPath+"/dockerbackend", aioPath+"/aiodriver"))
	assert.False(t, aioImportAllowed(aioPath+"/aioserver", aioPath))
	assert.True(t, aioImportAllowed(aioPath+"/provisioner/kube", aioPath+"/provisioner"))
	assert.True(t, aioImportAllowed(aioPath+"/redisstore", aioPath+"/orchestrator"))
}
