package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envReaders are the packages outside cmd/ whose non-test code reads the
// process environment (os.Getenv, os.LookupEnv, os.Environ), with what
// for. ARCHITECTURE.md ("cmd/sage") says the same in prose: each is the
// fallback of a setting the caller left empty, a host setting passed on,
// or a function whose job is to read it. A new reader must be added here
// and there.
var envReaders = map[string]string{
	"internal/doctor":                                          "sage doctor's defaults (cmd/sage only)",
	"internal/exportcount":                                     "the go command's environment, passed on to go list (GOOS with -goos)",
	"internal/sagehome":                                        "SAGE_HOME",
	"internal/testenv":                                         "test helpers (SAGE_TEST_*, SAGE_SHARED_DIR, the binaries' paths)",
	"sagents/llm":                                              "SAGE_PROMPT_CACHE when Config.PromptCache is empty",
	"sagents/sandbox":                                          "ConfigFromEnv (SAGE_SANDBOX_*, SAGE_LOCAL_*, SAGE_REMOTE_*) when a program calls it",
	"sagents/sandbox/internal/hostkit":                         "the host's allowlisted variables (PATH, LANG, ...) passed to commands (Environ)",
	"sagents/sandbox/sessiond":                                 "the session daemon's start handshake (SAGE_SESSIOND_READY_FD) and the environment it passes to the daemon it starts",
	"sagents/observability/otelsage":                           "the standard OTEL_* variables",
	"sagents/sandbox/providers/local":                          "SAGE_LOCAL_UID_RANGE (RunAsSummary), pip's PIP_* for requirements installs",
	"sagents/sandbox/providers/local/internal/isolation":       "SAGE_RUNSC (gVisor's runsc)",
	"sagents/sandbox/providers/local/supervisor":               "the environment inside the sandbox, passed to commands",
	"sagents/sandbox/providers/passthrough":                    "SAGE_SERVER_PROCESS (refuses to run inside a server)",
	"sagents/sandbox/providers/remote/aio/aiodriver":           "pip's PIP_* for requirements installs",
	"sagents/sandbox/providers/remote/aio/dockerbackend":       "the host's environment for debootstrap (sage image build)",
	"sagents/sandbox/providers/remote/aio/orchestrator":        "SAGE_AIO_* when provider_config leaves a key out; ${VAR} in its container env",
	"sagents/sandbox/providers/remote/aio/provisioner":         "SAGE_PROVISIONER_* when provider_config leaves a key out",
	"sagents/sandbox/providers/remote/aio/provisioner/kube":    "KUBECONFIG",
	"sagents/sandbox/providers/remote/aio/faulttest/faulthost": "the fault test's host program (FAULT_*)",
	"sagents/sandbox/providers/remote/opensandbox":             "SAGE_OPENSANDBOX_* when provider_config leaves a key out",
}

// TestEnvironmentReaders: the packages outside cmd/ that read the
// environment are the ones envReaders (and ARCHITECTURE.md) name, no more
// and no fewer. The claim it keeps true: "only cmd/sage reads environment
// variables" was false; the list is what is true.
func TestEnvironmentReaders(t *testing.T) {
	found := map[string]bool{}
	for _, top := range []string{"sagents", "internal", "adapters"} {
		err := filepath.WalkDir(filepath.Join("../..", top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			os := ""
			for _, im := range f.Imports {
				if path, _ := strconv.Unquote(im.Path.Value); path == "os" {
					os = "os"
					if im.Name != nil {
						os = im.Name.Name
					}
				}
			}
			if os == "" {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == os && slices.Contains([]string{"Getenv", "LookupEnv", "Environ"}, sel.Sel.Name) {
					rel, _ := filepath.Rel("../..", filepath.Dir(p))
					found[filepath.ToSlash(rel)] = true
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, found, "the walk found no reader at all: it is broken")
	for dir := range found {
		assert.Contains(t, envReaders, dir, "%s reads the environment outside cmd/: add it, with what for, to envReaders and to ARCHITECTURE.md", dir)
	}
	for dir := range envReaders {
		assert.True(t, found[dir], "%s is listed as reading the environment but no longer does: drop it from envReaders and ARCHITECTURE.md", dir)
	}
}
