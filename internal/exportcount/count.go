package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/tools/go/packages"
)

// options says what count loads.
type options struct {
	root    string   // the module whose packages are counted
	modules []string // other modules whose code counts as users (adapters/*)
	docs    []string // Markdown files whose Go snippets count as users
	goos    []string // GOOS values loaded besides the host's
}

// result is count's answer: each package's exported names, by import path.
type result struct {
	module string
	pkgs   map[string]*pkgNames
}

// pkgNames is one package's exported names (Name, or Type.Method for a
// method), each with whether it has a user outside the package's directory.
type pkgNames struct {
	path, name, dir string
	names           map[string]bool
}

func (p *pkgNames) counts() (n, used int) {
	for _, u := range p.names {
		n++
		if u {
			used++
		}
	}
	return n, used
}

// key names one exported name: its package's import path and its id.
type key struct{ pkg, id string }

const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
	packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedModule

// count loads o.root's packages (and o.modules') with their tests, and
// again without them (tests are the host's) for each other GOOS, and returns the exported names of o.root's packages and
// which have a user.
func count(o options) (*result, error) {
	r := &result{pkgs: map[string]*pkgNames{}}
	for _, goos := range append([]string{""}, o.goos...) {
		env := os.Environ()
		if goos != "" {
			env = append(env, "GOOS="+goos)
		}
		tests := goos == "" // this module's tests are the host's (Linux's)
		pkgs, err := load(o.root, env, tests)
		if err != nil {
			return nil, err
		}
		l := newLoad(r, pkgs)
		for _, m := range o.modules {
			more, err := load(m, env, tests)
			if err != nil {
				return nil, err
			}
			l.uses(more)
		}
		l.uses(pkgs)
		if err := l.docs(o.docs); err != nil {
			return nil, err
		}
		l.implemented(pkgs)
		l.reach()
	}
	if r.module == "" {
		return nil, fmt.Errorf("no module in %s", o.root)
	}
	return r, nil
}

func load(dir string, env []string, tests bool) ([]*packages.Package, error) {
	pkgs, err := packages.Load(&packages.Config{Mode: loadMode, Dir: dir, Env: env, Tests: tests}, "./...")
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	var errs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %s", p.ID, e.Msg))
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("load %s: %w", dir, errors.Join(errs...))
	}
	return pkgs, nil
}

// aLoad is one GOOS's load of the module: its declared names' objects
// and what has been found used so far.
type aLoad struct {
	r     *result
	objs  map[key]types.Object
	used  map[key]bool
	queue []key // used names whose mentions are not walked yet
	// values are each type's constants and variables: a used type's
	// values are API (the Kind constants of an Error's Kind field).
	values map[*types.TypeName][]key
}

// newLoad records the exported names that pkgs' non-test variants
// declare (packages main left out).
func newLoad(r *result, pkgs []*packages.Package) *aLoad {
	l := &aLoad{r: r, objs: map[key]types.Object{}, used: map[key]bool{}, values: map[*types.TypeName][]key{}}
	for _, p := range pkgs {
		if p.ID != p.PkgPath || p.Name == "main" || len(p.GoFiles) == 0 || p.Module == nil {
			continue
		}
		r.module = p.Module.Path
		pn := r.pkgs[p.PkgPath]
		if pn == nil {
			pn = &pkgNames{path: p.PkgPath, name: p.Name, dir: filepath.Dir(p.GoFiles[0]), names: map[string]bool{}}
			r.pkgs[p.PkgPath] = pn
		}
		scope := p.Types.Scope()
		for _, n := range scope.Names() {
			obj := scope.Lookup(n)
			if !obj.Exported() {
				continue
			}
			l.declare(pn, n, obj)
			if _, ok := obj.(*types.TypeName); !ok {
				if t := namedOf(obj.Type()); t != nil && !types.IsInterface(t) {
					l.values[t.Obj()] = append(l.values[t.Obj()], key{pn.path, n})
				}
			}
			tn, ok := obj.(*types.TypeName)
			if !ok || tn.IsAlias() || types.IsInterface(tn.Type()) {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok {
				continue
			}
			for m := range named.Methods() {
				if m.Exported() {
					l.declare(pn, n+"."+m.Name(), m)
				}
			}
		}
	}
	return l
}

func (l *aLoad) declare(pn *pkgNames, id string, obj types.Object) {
	k := key{pn.path, id}
	l.objs[k] = obj
	if _, ok := pn.names[id]; !ok {
		pn.names[id] = false
	}
}

// keyOf is obj's key, whether or not the module declares it.
func keyOf(obj types.Object) (key, bool) {
	if obj == nil || obj.Pkg() == nil || !obj.Exported() {
		return key{}, false
	}
	if f, ok := obj.(*types.Func); ok {
		if recv := f.Signature().Recv(); recv != nil {
			n := namedOf(recv.Type())
			if n == nil {
				return key{}, false
			}
			return key{obj.Pkg().Path(), n.Obj().Name() + "." + obj.Name()}, true
		}
	}
	if v, ok := obj.(*types.Var); ok && v.IsField() {
		return key{}, false
	}
	if obj.Parent() != obj.Pkg().Scope() {
		return key{}, false
	}
	return key{obj.Pkg().Path(), obj.Name()}, true
}

// namedOf is t's named type, through a pointer (nil for another type).
func namedOf(t types.Type) *types.Named {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := types.Unalias(t).(*types.Named)
	if n != nil {
		n = n.Origin()
	}
	return n
}

// use marks k used (and to be walked, when this load declares it).
func (l *aLoad) use(k key) {
	pn := l.r.pkgs[k.pkg]
	if pn == nil {
		return
	}
	if _, ok := pn.names[k.id]; !ok {
		return
	}
	pn.names[k.id] = true
	if !l.used[k] {
		l.used[k] = true
		l.queue = append(l.queue, k)
	}
}

// uses marks the names that pkgs' files use outside the names' own
// directories, and those the Example functions of a package's external
// tests use.
func (l *aLoad) uses(pkgs []*packages.Package) {
	seen := map[string]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if p.TypesInfo == nil {
			return
		}
		for i, f := range p.Syntax {
			name := p.CompiledGoFiles[i]
			if seen[name] {
				continue
			}
			seen[name] = true
			dir := filepath.Dir(name)
			example := strings.HasSuffix(p.Name, "_test") && strings.HasSuffix(name, "_test.go")
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				inExample := example && ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example")
				l.usesIn(p.TypesInfo, d, dir, inExample)
			}
		}
	})
}

func (l *aLoad) usesIn(info *types.Info, n ast.Node, dir string, always bool) {
	outside := func(k key) bool {
		pn := l.r.pkgs[k.pkg]
		return pn != nil && (always || pn.dir != dir)
	}
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if k, ok := keyOf(info.Uses[n]); ok && outside(k) {
				l.use(k)
			}
		case *ast.SelectorExpr:
			if s := info.Selections[n]; s != nil {
				if t := namedOf(s.Recv()); t != nil {
					if k, ok := keyOf(t.Obj()); ok && outside(k) {
						l.use(k)
					}
				}
			}
		}
		return true
	})
}

var selector = regexp.MustCompile(`\b([a-z][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)`)

// docs marks the names the Go snippets of the Markdown files use:
// pkg.Name of a package named pkg, and x.Name as the methods named Name
// of the packages the snippet names.
func (l *aLoad) docs(files []string) error {
	byName := map[string][]*pkgNames{}
	for _, p := range l.r.pkgs {
		byName[p.name] = append(byName[p.name], p)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		for _, snippet := range goSnippets(string(b)) {
			var named []*pkgNames
			var methods []string
			for _, m := range selector.FindAllStringSubmatch(snippet, -1) {
				ps, ok := byName[m[1]]
				if !ok {
					methods = append(methods, m[2])
					continue
				}
				named = append(named, ps...)
				for _, p := range ps {
					l.use(key{p.path, m[2]})
				}
			}
			for _, p := range named {
				for id := range p.names {
					for _, m := range methods {
						if strings.HasSuffix(id, "."+m) {
							l.use(key{p.path, id})
						}
					}
				}
			}
		}
	}
	return nil
}

// goSnippets returns the text of md's ```go fenced blocks.
func goSnippets(md string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// iface is an interface some code names, and where.
type iface struct {
	t   *types.Interface
	pkg string // the declaring package's path
	dir string // for an unnamed one, the directory that spells it
	exp bool   // an exported named interface
}

// implemented marks the methods that implement an interface of the same
// method declared outside their package (or exported by it): code
// calling the interface's method reaches them.
func (l *aLoad) implemented(pkgs []*packages.Package) {
	byMethod := map[string][]iface{}
	add := func(i iface) {
		for m := range i.t.Methods() {
			byMethod[m.Name()] = append(byMethod[m.Name()], i)
		}
	}
	add(iface{t: types.Universe.Lookup("error").Type().Underlying().(*types.Interface), exp: true})
	for _, it := range errorsInterfaces() {
		add(iface{t: it, pkg: "errors", exp: true})
	}
	scopes := map[*types.Package]bool{}
	var scope func(tp *types.Package)
	scope = func(tp *types.Package) {
		if scopes[tp] {
			return
		}
		scopes[tp] = true
		s := tp.Scope()
		for _, n := range s.Names() {
			if tn, ok := s.Lookup(n).(*types.TypeName); ok {
				if it, ok := tn.Type().Underlying().(*types.Interface); ok {
					add(iface{t: it, pkg: tp.Path(), exp: tn.Exported()})
				}
			}
		}
	}
	for _, p := range pkgs {
		if p.Types == nil || p.ID != p.PkgPath {
			continue
		}
		scope(p.Types)
		for _, imp := range p.Types.Imports() {
			scope(imp)
		}
		for e, tv := range p.TypesInfo.Types {
			if it, ok := tv.Type.(*types.Interface); ok {
				add(iface{t: it, pkg: p.PkgPath, dir: filepath.Dir(p.Fset.Position(e.Pos()).Filename)})
			}
		}
	}
	for k, obj := range l.objs {
		f, ok := obj.(*types.Func)
		if !ok || f.Signature().Recv() == nil {
			continue
		}
		recv := f.Signature().Recv().Type()
		ptr := types.NewPointer(namedOf(recv))
		pn := l.r.pkgs[k.pkg]
		for _, i := range byMethod[f.Name()] {
			foreign := i.pkg != k.pkg || i.exp || (i.dir != "" && i.dir != pn.dir)
			if foreign && types.Implements(ptr, i.t) {
				pn.names[k.id] = true // its type is not used by this
				break
			}
		}
	}
}

// errorsInterfaces are the unnamed interfaces errors.Is, As and Unwrap
// assert: an error's Unwrap, Is and As methods have that caller.
func errorsInterfaces() []*types.Interface {
	errT := types.Universe.Lookup("error").Type()
	any := types.Universe.Lookup("any").Type()
	method := func(name string, params, results []types.Type) *types.Interface {
		vars := func(ts []types.Type) *types.Tuple {
			var vs []*types.Var
			for _, t := range ts {
				vs = append(vs, types.NewParam(0, nil, "", t))
			}
			return types.NewTuple(vs...)
		}
		sig := types.NewSignatureType(nil, nil, nil, vars(params), vars(results), false)
		return types.NewInterfaceType([]*types.Func{types.NewFunc(0, nil, name, sig)}, nil).Complete()
	}
	boolT := types.Typ[types.Bool]
	return []*types.Interface{
		method("Unwrap", nil, []types.Type{errT}),
		method("Unwrap", nil, []types.Type{types.NewSlice(errT)}),
		method("Is", []types.Type{errT}, []types.Type{boolT}),
		method("As", []types.Type{any}, []types.Type{boolT}),
	}
}

// reach marks the names the used ones mention: the types of a used
// function's signature, variable or constant, the fields and method
// signatures of a used type, a used method's receiver.
func (l *aLoad) reach() {
	for len(l.queue) > 0 {
		k := l.queue[0]
		l.queue = l.queue[1:]
		obj := l.objs[k]
		if obj == nil {
			continue
		}
		seen := map[types.Type]bool{}
		switch obj := obj.(type) {
		case *types.TypeName:
			l.mentions(obj.Type().Underlying(), seen)
			for _, v := range l.values[obj] {
				l.use(v)
			}
		case *types.Func:
			if recv := obj.Signature().Recv(); recv != nil {
				l.mentions(recv.Type(), seen)
			}
			l.mentions(obj.Signature(), seen)
		default:
			l.mentions(obj.Type(), seen)
		}
	}
}

// mentions marks the module's named types in t.
func (l *aLoad) mentions(t types.Type, seen map[types.Type]bool) {
	if t == nil || seen[t] {
		return
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		l.mentions(types.Unalias(t), seen)
	case *types.Named:
		if k, ok := keyOf(t.Origin().Obj()); ok {
			l.use(k)
		}
		for a := range t.TypeArgs().Types() {
			l.mentions(a, seen)
		}
	case *types.Pointer:
		l.mentions(t.Elem(), seen)
	case *types.Slice:
		l.mentions(t.Elem(), seen)
	case *types.Array:
		l.mentions(t.Elem(), seen)
	case *types.Chan:
		l.mentions(t.Elem(), seen)
	case *types.Map:
		l.mentions(t.Key(), seen)
		l.mentions(t.Elem(), seen)
	case *types.Signature:
		for v := range t.Params().Variables() {
			l.mentions(v.Type(), seen)
		}
		for v := range t.Results().Variables() {
			l.mentions(v.Type(), seen)
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() {
				l.mentions(f.Type(), seen)
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			l.mentions(m.Type(), seen)
		}
		for e := range t.EmbeddedTypes() {
			l.mentions(e, seen)
		}
	}
}
