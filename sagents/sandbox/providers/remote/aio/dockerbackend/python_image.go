package dockerbackend

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// pythonInfo is what the host interpreter says of itself.
type pythonInfo struct {
	Exe     string `json:"exe"`
	Stdlib  string `json:"stdlib"`
	Plat    string `json:"platstdlib"`
	Version string `json:"version"`
}

// skipStdlib are parts of the standard library a sandbox does not need
// (GUI, tests, installed packages, caches).
var skipStdlib = map[string]bool{"site-packages": true, "dist-packages": true, "__pycache__": true, "test": true,
	"idlelib": true, "tkinter": true, "turtledemo": true, "lib2to3": true}

// addPython copies a host python3 into the image at the same paths: the
// interpreter, its standard library (without tests, GUI and installed
// packages) and every shared library they load, found through the ELF
// files' DT_NEEDED entries in the system library directories, plus the
// program interpreter. /bin/python3 points at it (the image's PATH is
// /bin). A python3 of a distribution (Debian's /usr/bin/python3) is what
// this is for; one with its libraries elsewhere fails with the library
// it could not find.
func addPython(add func(*tar.Header, []byte) error, python string) error {
	info, err := askPython(python)
	if err != nil {
		return err
	}
	c := &imageCopy{add: add, dirs: map[string]bool{"rootfs": true, "rootfs/bin": true}}
	elfs := []string{info.Exe}
	for _, root := range uniq(info.Stdlib, info.Plat) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && skipStdlib[d.Name()] {
				return filepath.SkipDir
			}
			switch {
			case d.IsDir():
				return c.dir(p)
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				return c.symlink(p, target)
			case d.Type().IsRegular():
				if strings.HasSuffix(p, ".so") {
					elfs = append(elfs, p)
				}
				return c.file(p, p)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("image: python standard library %s: %w", root, err)
		}
	}
	if err := c.file(info.Exe, info.Exe); err != nil {
		return err
	}
	libs, err := sharedLibraries(elfs)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := c.file(l, l); err != nil {
			return err
		}
	}
	for _, link := range []string{"/bin/python3", "/bin/python"} {
		if err := c.symlink(link, info.Exe); err != nil {
			return err
		}
	}
	return nil
}

func askPython(python string) (*pythonInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", `import json,os,sys,sysconfig
p = sysconfig.get_paths()
print(json.dumps({"exe": os.path.realpath(sys.executable), "stdlib": p["stdlib"], "platstdlib": p["platstdlib"], "version": "%d.%d" % sys.version_info[:2]}))`).Output()
	if err != nil {
		return nil, fmt.Errorf("image: ask %s where it lives (fix: --python /usr/bin/python3, or --python none to leave Python out): %w", python, err)
	}
	var info pythonInfo
	if err := json.Unmarshal(out, &info); err != nil || info.Exe == "" || info.Stdlib == "" {
		return nil, fmt.Errorf("image: %s answered %q", python, out)
	}
	return &info, nil
}

// libraryDirs are where DT_NEEDED names are looked up, as the dynamic
// loader of a multiarch distribution does without an ld.so.cache.
func libraryDirs() []string {
	triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	dirs := []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	if triple != "" {
		dirs = append([]string{"/lib/" + triple, "/usr/lib/" + triple}, dirs...)
	}
	return dirs
}

// sharedLibraries is the closure of the libraries the ELF files load,
// with their program interpreter, as paths to copy.
func sharedLibraries(files []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	queue := append([]string{}, files...)
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		e, err := elf.Open(f)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", f, err)
		}
		needed, err := e.ImportedLibraries()
		var interp string
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				b := make([]byte, p.Filesz)
				if _, rerr := p.ReadAt(b, 0); rerr == nil {
					interp = strings.TrimRight(string(b), "\x00")
				}
			}
		}
		e.Close()
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", f, err)
		}
		if interp != "" && !seen[interp] {
			seen[interp] = true
			out = append(out, interp)
		}
		for _, n := range needed {
			p, ok := findLibrary(n)
			if !ok {
				return nil, fmt.Errorf("image: %s needs %s, which is in none of %s", f, n, strings.Join(libraryDirs(), " "))
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
				queue = append(queue, p)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func findLibrary(name string) (string, bool) {
	if strings.Contains(name, "/") {
		_, err := os.Stat(name)
		return name, err == nil
	}
	for _, d := range libraryDirs() {
		p := path.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// imageCopy adds host files under rootfs/ at the same paths, with their
// parent directories.
type imageCopy struct {
	add  func(*tar.Header, []byte) error
	dirs map[string]bool
}

func (c *imageCopy) parents(name string) error {
	dir := path.Dir(name)
	if c.dirs[dir] {
		return nil
	}
	if err := c.parents(dir); err != nil {
		return err
	}
	c.dirs[dir] = true
	return c.add(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir}, nil)
}

func (c *imageCopy) dir(p string) error {
	name := "rootfs" + path.Clean(p)
	if c.dirs[name] {
		return nil
	}
	if err := c.parents(name); err != nil {
		return err
	}
	c.dirs[name] = true
	return c.add(&tar.Header{Name: name + "/", Mode: 0o755, Typeflag: tar.TypeDir}, nil)
}

// file adds the content of src (symlinks followed) at dst.
func (c *imageCopy) file(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	name := "rootfs" + path.Clean(dst)
	if c.dirs[name] {
		return errors.New("image: " + dst + " is a directory")
	}
	if err := c.parents(name); err != nil {
		return err
	}
	return c.add(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: int64(len(data)), Typeflag: tar.TypeReg}, data)
}

func (c *imageCopy) symlink(p, target string) error {
	name := "rootfs" + path.Clean(p)
	if err := c.parents(name); err != nil {
		return err
	}
	return c.add(&tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}, nil)
}

func uniq(a, b string) []string {
	if a == b || b == "" {
		return []string{a}
	}
	return []string{a, b}
}
