package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	var o options
	unused := flag.Bool("unused", false, "list the names without a user outside their package's directory")
	goos := flag.String("goos", "", "another GOOS whose files count too (comma-separated), besides the host's")
	flag.StringVar(&o.root, "C", ".", "the module's root directory")
	flag.Parse()
	if *goos != "" {
		o.goos = strings.Split(*goos, ",")
	}
	adapters, err := filepath.Glob(filepath.Join(o.root, "adapters", "*", "go.mod"))
	if err != nil {
		fatal(err)
	}
	for _, m := range adapters {
		o.modules = append(o.modules, filepath.Dir(m))
	}
	docs, err := filepath.Glob(filepath.Join(o.root, "docs", "*.md"))
	if err != nil {
		fatal(err)
	}
	o.docs = append([]string{filepath.Join(o.root, "README.md")}, docs...)
	res, err := count(o)
	if err != nil {
		fatal(err)
	}
	res.print(os.Stdout, *unused)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "exportcount:", err)
	os.Exit(1)
}

// print writes the table (and with unused, each package's names without
// a user) to w.
func (r *result) print(w io.Writer, unused bool) {
	fmt.Fprintf(w, "%-56s %8s %6s %8s\n", "package", "exported", "used", "unused")
	var total, used int
	for _, p := range r.sorted() {
		n, u := p.counts()
		total, used = total+n, used+u
		fmt.Fprintf(w, "%-56s %8d %6d %8d\n", strings.TrimPrefix(p.path, r.module+"/"), n, u, n-u)
	}
	fmt.Fprintf(w, "%-56s %8d %6d %8d\n", "total", total, used, total-used)
	if !unused {
		return
	}
	for _, p := range r.sorted() {
		var names []string
		for id, u := range p.names {
			if !u {
				names = append(names, id)
			}
		}
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		fmt.Fprintf(w, "\n%s:\n\t%s\n", strings.TrimPrefix(p.path, r.module+"/"), strings.Join(names, "\n\t"))
	}
}

func (r *result) sorted() []*pkgNames {
	out := make([]*pkgNames, 0, len(r.pkgs))
	for _, p := range r.pkgs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
