package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isolationPrograms are the programs an isolation backend starts, or
// looks up to start: they belong in providers/local/internal/isolation.
var isolationPrograms = []string{"bwrap", "runsc", "prlimit", "sandbox-exec", "/usr/bin/sandbox-exec"}

// isolationDrift says where the isolation backends drift back into the
// root package local, given its non-test sources (name -> text, every
// build tag):
//   - a type of the root declares Wrap (or wrap), isolation.Backend's
//     method that turns an invocation into a host process (the rest of
//     Backend's methods are names the Sandbox has too: Close,
//     LimitsEnforced);
//   - the root names one of isolationPrograms as a literal argument of
//     a call (exec.Command, exec.LookPath, ...).
func isolationDrift(files map[string]string) (errs []string, err error) {
	methods := map[string][]string{} // receiver type -> its methods
	fset := token.NewFileSet()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, files[name], parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				recv := receiverName(fd.Recv.List[0].Type)
				methods[recv] = append(methods[recv], fd.Name.Name)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			for _, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if v, _ := strconv.Unquote(lit.Value); slices.Contains(isolationPrograms, v) {
					errs = append(errs, fset.Position(lit.Pos()).String()+": starts "+v+": an isolation backend's program belongs in internal/isolation")
				}
			}
			return true
		})
	}
	recvs := make([]string, 0, len(methods))
	for r := range methods {
		recvs = append(recvs, r)
	}
	sort.Strings(recvs)
	for _, r := range recvs {
		if slices.ContainsFunc(methods[r], func(m string) bool { return strings.EqualFold(m, "Wrap") }) {
			errs = append(errs, r+": declares Wrap, as an isolation.Backend does: an isolation backend belongs in internal/isolation")
		}
	}
	return errs, nil
}

// receiverName is the type name of a method's receiver (T, *T, T[P]).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// interfaceMethods are the methods of interface name declared in src.
func interfaceMethods(t *testing.T, src, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		if it, ok := ts.Type.(*ast.InterfaceType); ok {
			for _, m := range it.Methods.List {
				for _, n := range m.Names {
					out = append(out, n.Name)
				}
			}
		}
		return false
	})
	return out
}

// TestIsolationStaysInItsRoom: the isolation backends live in
// providers/local/internal/isolation (TestLocalRooms keeps it from
// importing the root); the root package local wires one and starts none
// itself: no type of it implements isolation.Backend, and it names no
// isolation program in a call (isolationDrift).
func TestIsolationStaysInItsRoom(t *testing.T) {
	dir := filepath.Join("../..", "sagents/sandbox/providers/local")
	iface, err := os.ReadFile(filepath.Join(dir, "internal/isolation/isolation.go"))
	require.NoError(t, err)
	require.Contains(t, interfaceMethods(t, string(iface), "Backend"), "Wrap",
		"isolation.Backend has Wrap, the method isolationDrift looks for")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string]string{}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			b, err := os.ReadFile(filepath.Join(dir, n))
			require.NoError(t, err)
			files[n] = string(b)
		}
	}
	require.NotEmpty(t, files)
	errs, err := isolationDrift(files)
	require.NoError(t, err)
	assert.Empty(t, errs)
}

// TestIsolationStaysInItsRoomControl: a root with a backend type of its
// own (a generic one too) and a bwrap lookup is caught, each once; the
// wiring, the Sandbox's own methods (Close, LimitsEnforced), a type with
// Backend's other methods and a program's name inside a longer argument
// are not.
func TestIsolationStaysInItsRoomControl(t *testing.T) {
	files := map[string]string{
		"wiring.go": `package local
func newBackend() (isolation.Backend, error) { return isolation.New(ctx, o) }
func (s *Sandbox) Close() error { return s.iso.Close() }
func (s *Sandbox) LimitsEnforced() int { return 0 }
func (s *Sandbox) run() { exec.Command(s.path, "bwrap-is-only-an-argument-here") }`,
		"bwrap_linux.go": `package local
type bwrapIsolator struct{}
func (b *bwrapIsolator) wrap(inv invocation) (*wrapped, error) { return nil, nil }
func findBwrap() { exec.LookPath("bwrap") }`,
		"other.go": `package local
type quiet[T any] struct{}
func (quiet[T]) VirtualWorkspace() string { return "" }
func (quiet[T]) Place(a, b string) string { return "" }
func (quiet[T]) Run() {}
func (quiet[T]) Close() error { return nil }
func (quiet[T]) LimitsEnforced() int { return 0 }
func (quiet[T]) Kind() string { return "" }
func (*quiet[T]) Wrapped() {}`,
		"generic.go": `package local
type sneaky[T any] struct{}
func (*sneaky[T]) Wrap() {}`,
	}
	errs, err := isolationDrift(files)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"bwrap_linux.go:4:34: starts bwrap: an isolation backend's program belongs in internal/isolation",
		"bwrapIsolator: declares Wrap, as an isolation.Backend does: an isolation backend belongs in internal/isolation",
		"sneaky: declares Wrap, as an isolation.Backend does: an isolation backend belongs in internal/isolation",
	}, errs)
}
