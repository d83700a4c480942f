package archtest

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/sage-go/sage/"

type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
}

// list runs go list -json on patterns, from the module root (Deps is
// what a package links, transitively).
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	return listIn(t, "../..", patterns...)
}

// listIn is list from dir (another module's root).
func listIn(t *testing.T, dir string, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-json"}, patterns...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", patterns)
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layer gives the layer of a package of the module: a package may import
// only packages of a lower layer or its own subtree. -1: not layered.
func layer(path string) int {
	rel := strings.TrimPrefix(path, module)
	for _, l := range []struct {
		prefix string
		n      int
	}{
		{"cmd/internal/", 6},
		{"cmd/", 7}, {"examples/", 7},
		{"sagents/sage", 5},
		{"sagents/agent", 4},
		{"sagents/tools", 3},
		{"sagents/sandbox", 2}, {"sagents/llm", 2},
		{"sagents/observability", 1},
		{"internal/", 0},
	} {
		if strings.HasPrefix(rel, l.prefix) {
			return l.n
		}
	}
	return -1
}

// owner is the top package of path's layer ("sagents/sandbox" for
// sagents/sandbox/providers/local): imports within one owner are free.
func owner(path string) string {
	rel := strings.TrimPrefix(path, module)
	parts := strings.Split(rel, "/")
	if len(parts) >= 2 && (parts[0] == "sagents" || parts[0] == "cmd" || parts[0] == "examples") {
		return parts[0] + "/" + parts[1]
	}
	return rel
}

// TestImportsRunOneWay: cmd -> cmd/internal -> sage -> agent -> tools -> sandbox/llm ->
// observability, internal at the bottom; never upwards or sideways
// (sandbox and llm do not import each other).
func TestImportsRunOneWay(t *testing.T) {
	pkgs := list(t, "./...")
	require.NotEmpty(t, pkgs)
	checked := 0
	for _, p := range pkgs {
		from := layer(p.ImportPath)
		if from < 0 {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) || owner(imp) == owner(p.ImportPath) {
				continue
			}
			to := layer(imp)
			checked++
			if strings.HasPrefix(p.ImportPath, module+"internal/") && to > 0 {
				// internal helpers of a layer (doctor checks the local mode).
				continue
			}
			assert.Less(t, to, from, "%s imports %s: imports run cmd -> sage -> agent -> tools -> sandbox/llm -> observability",
				strings.TrimPrefix(p.ImportPath, module), strings.TrimPrefix(imp, module))
		}
	}
	assert.Greater(t, checked, 10, "the check saw too few imports to mean anything")
}

// TestLayerControl proves the check above can fail: an upward import is
// flagged.
func TestLayerControl(t *testing.T) {
	assert.False(t, layer(module+"sagents/tools") < layer(module+"sagents/sandbox"),
		"tools -> sandbox is downward")
	assert.True(t, layer(module+"sagents/agent") > layer(module+"sagents/sandbox/providers/local"))
	assert.NotEqual(t, owner(module+"sagents/sandbox/providers/local"), owner(module+"sagents/llm"))
	assert.Greater(t, layer(module+"sagents/sage"), layer(module+"sagents/agent"), "sage wires the agent")
	assert.Greater(t, layer(module+"examples/agent"), layer(module+"sagents/sage/sagetest"))
}

// TestAdaptersAreTheirOwnModules: the framework adapters under adapters/
// are modules of their own, so the core module's packages (what `go test
// ./...` sees here) neither contain nor import them, and none of eino's,
// langchaingo's or genkit's packages is linked by the core.
func TestAdaptersAreTheirOwnModules(t *testing.T) {
	for _, p := range list(t, "./...") {
		assert.False(t, strings.HasPrefix(p.ImportPath, module+"adapters/"), "%s is in the core module", p.ImportPath)
		for _, d := range p.Deps {
			for _, fw := range []string{module + "adapters/", "github.com/cloudwego/", "github.com/tmc/langchaingo/", "github.com/firebase/genkit/"} {
				assert.False(t, strings.HasPrefix(d, fw), "%s links %s", p.ImportPath, d)
			}
		}
	}
	frameworks := map[string]string{"eino": "github.com/cloudwego/eino/", "langchaingo": "github.com/tmc/langchaingo/",
		"genkit": "github.com/firebase/genkit/"}
	for a, fw := range frameworks {
		dir := filepath.Join("../../adapters", a)
		require.FileExists(t, filepath.Join(dir, "go.mod"), "adapters/%s is a module", a)
		// Control: the adapter itself links its framework, so the
		// prefixes above are the ones to look for.
		pkgs := listIn(t, dir, ".")
		require.Len(t, pkgs, 1)
		assert.True(t, slices.ContainsFunc(pkgs[0].Deps, func(d string) bool { return strings.HasPrefix(d, fw) }),
			"adapters/%s links %s", a, fw)
	}
}

var heavy = []string{"go.opentelemetry.io/", "github.com/docker/", "k8s.io/", "github.com/getkin/kin-openapi"}

func heavyDeps(p pkg) []string {
	var out []string
	for _, d := range p.Deps {
		for _, h := range heavy {
			if strings.HasPrefix(d, h) {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestCoreLinksLight: the sandbox core, the local mode, package sage and
// every example link no OpenTelemetry, Docker, Kubernetes or kin-openapi package, and
// (control) the OTel handler does, so the check sees them.
func TestCoreLinksLight(t *testing.T) {
	pkgs := list(t, "./sagents/sandbox", "./sagents/sandbox/providers/local", "./sagents/sage", "./examples/...", "./sagents/observability/otelsage")
	require.Greater(t, len(pkgs), 5)
	for _, p := range pkgs {
		if p.ImportPath == module+"sagents/observability/otelsage" {
			assert.NotEmpty(t, heavyDeps(p), "control: the OTel handler links OpenTelemetry")
			continue
		}
		assert.Empty(t, heavyDeps(p), "%s links heavy packages", p.ImportPath)
	}
}

// TestCLILinksNoKubernetes: the sage CLI links no Kubernetes package (the
// Kubernetes backend is the program sage-provisioner: client-go was over
// half of a sage that linked it), and (control) sage-provisioner does, so
// the check sees them.
func TestCLILinksNoKubernetes(t *testing.T) {
	kubeDeps := func(p pkg) (out []string) {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") || d == module+"sagents/sandbox/providers/remote/aio/provisioner/kube" {
				out = append(out, d)
			}
		}
		return out
	}
	pkgs := list(t, "./cmd/sage", "./cmd/sage-provisioner")
	require.Len(t, pkgs, 2)
	for _, p := range pkgs {
		if p.ImportPath == module+"cmd/sage-provisioner" {
			assert.NotEmpty(t, kubeDeps(p), "control: sage-provisioner links the Kubernetes backend")
			continue
		}
		assert.Empty(t, kubeDeps(p), "%s links Kubernetes packages", p.ImportPath)
	}
}

// TestCLIBuild: make build builds sage, sage-provisioner and
// sage-supervisor with no build tag and with -ldflags "-s -w", a release
// build without the symbol table and DWARF: sage is 35.9 MB so, 51.4 MB
// with them, as gRPC links golang.org/x/net/trace, whose html/template
// calls reflect's MethodByName, and the linker then keeps every exported
// method of every type stored in an interface. That weight comes through
// x/net/trace only: no other non-standard package sage links imports
// text/template or html/template (the check names x/net/trace as their
// one importer, so it sees one when there is one).
func TestCLIBuild(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^LDFLAGS\s*\?=\s*(.+)$`).FindSubmatch(mk)
	require.NotNil(t, m, "the Makefile sets no LDFLAGS")
	assert.ElementsMatch(t, []string{"-s", "-w"}, strings.Fields(string(m[1])), "the Makefile's LDFLAGS")
	for _, prog := range []string{"sage", "sage-provisioner", "sage-supervisor"} {
		line := regexp.MustCompile(`(?m)^\t.*\$\(GO\) build .*-o \$\(BIN\)/` + prog + ` \./cmd/` + prog + `$`).Find(mk)
		if assert.NotNil(t, line, "the Makefile builds no bin/%s", prog) {
			assert.Contains(t, string(line), `-ldflags="$(LDFLAGS)"`, "bin/%s", prog)
			assert.NotContains(t, string(line), "-tags", "bin/%s is built with build tags", prog)
		}
	}
	var importers []string
	for _, p := range list(t, "-deps", "./cmd/sage") {
		if !p.Standard && (slices.Contains(p.Imports, "text/template") || slices.Contains(p.Imports, "html/template")) {
			importers = append(importers, p.ImportPath)
		}
	}
	assert.Equal(t, []string{"golang.org/x/net/trace"}, importers, "the packages of sage that import text/template or html/template")
}
