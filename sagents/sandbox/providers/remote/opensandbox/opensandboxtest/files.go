package opensandboxtest

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// files serves /files/* and /directories*. Every path must be absolute.
func (e *Execd) files(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	paths := q["path"]
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			e.s.violation(w, "%s %s: path %q is not absolute", r.Method, r.URL.Path, p)
			return
		}
	}
	needPaths := func() bool {
		if len(paths) == 0 {
			e.s.violation(w, "%s %s: path is required", r.Method, r.URL.Path)
			return false
		}
		return true
	}
	switch r.URL.Path + " " + r.Method {
	case "/files/upload POST":
		e.upload(w, r)
	case "/files/download GET":
		if !needPaths() {
			return
		}
		f, err := os.Open(paths[0])
		if err != nil {
			fsError(w, err)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			fsError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if fi.IsDir() { // as execd: 200 and nothing
			w.WriteHeader(http.StatusOK)
			return
		}
		// Byte ranges (206 with Content-Range) as execd serves them.
		http.ServeContent(w, r, filepath.Base(paths[0]), fi.ModTime(), f)
	case "/files/info GET":
		if !needPaths() {
			return
		}
		out := map[string]fileInfo{}
		for _, p := range paths {
			fi, err := os.Lstat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found. file not found: "+p+": "+err.Error())
				return
			case err != nil:
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error accessing file: error accessing file "+p+": "+err.Error())
				return
			}
			out[p] = info(p, fi)
		}
		writeJSON(w, http.StatusOK, out)
	case "/files DELETE":
		// As execd: os.Stat (a symlink is followed), a missing path is
		// fine (so a dangling symlink stays), a directory is refused.
		if !needPaths() {
			return
		}
		for _, p := range paths {
			fi, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err == nil && fi.IsDir():
				err = errors.New("path is a directory: " + p)
			case err == nil:
				err = os.Remove(p)
			}
			if err != nil {
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error removing file "+p+". "+err.Error())
				return
			}
		}
	case "/files/mv POST":
		var items []struct {
			Src  string `json:"src"`
			Dest string `json:"dest"`
		}
		if err := decodeStrict(r, &items); err != nil {
			e.s.violation(w, "%v", err)
			return
		}
		for _, it := range items {
			if !filepath.IsAbs(it.Src) || !filepath.IsAbs(it.Dest) {
				e.s.violation(w, "mv: paths must be absolute: %+v", it)
				return
			}
			// As execd: the source must exist, the destination's
			// directory is made, and an existing destination (a symlink
			// followed) is refused.
			if _, err := os.Stat(it.Src); err != nil {
				writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found. source path not found: "+it.Src+": "+err.Error())
				return
			}
			if err := os.MkdirAll(filepath.Dir(it.Dest), 0o755); err != nil {
				fsError(w, err)
				return
			}
			if _, err := os.Stat(it.Dest); err == nil {
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error accessing file: destination path already exists: "+it.Dest)
				return
			}
			if err := os.Rename(it.Src, it.Dest); err != nil {
				fsError(w, err)
				return
			}
		}
	case "/directories POST":
		var dirs map[string]struct {
			Owner string `json:"owner"`
			Group string `json:"group"`
			Mode  *int   `json:"mode"`
		}
		if err := decodeStrict(r, &dirs); err != nil {
			e.s.violation(w, "%v", err)
			return
		}
		for d, p := range dirs {
			mode, ok := octal(p.Mode)
			if !filepath.IsAbs(d) || !ok {
				e.s.violation(w, "directories: path %q must be absolute, mode octal digits", d)
				return
			}
			// As execd: mkdir -p, then a chmod unless the mode is 0.
			err := os.MkdirAll(d, 0o777)
			if err == nil && mode != 0 {
				err = os.Chmod(d, mode)
			}
			if err != nil {
				fsError(w, err)
				return
			}
		}
	case "/directories DELETE":
		if !needPaths() {
			return
		}
		for _, p := range paths {
			if err := os.RemoveAll(p); err != nil {
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
				return
			}
		}
	case "/directories/list GET":
		if !needPaths() {
			return
		}
		e.list(w, paths[0], q.Get("depth"))
	default:
		e.s.violation(w, "execd %s %s: no such operation", r.Method, r.URL.Path)
	}
}

// octal reads a mode written as octal digits (644); nil means 0 (no
// chmod).
func octal(m *int) (fs.FileMode, bool) {
	if m == nil {
		return 0, true
	}
	v, err := strconv.ParseUint(strconv.Itoa(*m), 8, 32)
	return fs.FileMode(v), err == nil && v <= 0o7777
}

// fileInfo is execd's description of a file, in its field order.
type fileInfo struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
	CreatedAt  string `json:"created_at"`
	Owner      string `json:"owner"`
	Group      string `json:"group"`
	Mode       int    `json:"mode"`
}

func info(p string, fi fs.FileInfo) fileInfo {
	t := "file"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	case fi.IsDir():
		t = "directory"
	case !fi.Mode().IsRegular():
		t = "other"
	}
	mode, _ := strconv.Atoi(strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
	mt := fi.ModTime().UTC().Format(time.RFC3339)
	return fileInfo{Path: p, Type: t, Size: fi.Size(), ModifiedAt: mt, CreatedAt: mt, Owner: "root", Group: "root", Mode: mode}
}

func fsError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found. "+err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error accessing file: "+err.Error())
	}
}

func (e *Execd) list(w http.ResponseWriter, dir, depthArg string) {
	depth := 1
	if depthArg != "" {
		n, err := strconv.Atoi(depthArg)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "INVALID_DEPTH", "bad depth "+depthArg)
			return
		}
		depth = n
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		fsError(w, err)
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "path is a symbolic link, refusing to traverse: "+dir)
		return
	}
	if !fi.IsDir() {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error accessing file: "+dir+" is not a directory")
		return
	}
	out := []fileInfo{}
	var walk func(d string, level int) error
	walk = func(d string, level int) error {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, ent := range ents {
			p := filepath.Join(d, ent.Name())
			fi, err := ent.Info()
			if err != nil {
				continue
			}
			out = append(out, info(p, fi))
			if ent.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir, 1); err != nil {
		fsError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// upload reads metadata and file parts in turn and writes each file.
func (e *Execd) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		e.s.violation(w, "upload: %v", err)
		return
	}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			if n == 0 {
				e.s.violation(w, "upload: no parts")
			}
			return
		}
		if err != nil || part.FormName() != "metadata" || part.Header.Get("Content-Type") != "application/json" {
			e.s.violation(w, "upload: part %d must be metadata (application/json): %v", n, err)
			return
		}
		var meta struct {
			Path  string `json:"path"`
			Owner string `json:"owner"`
			Group string `json:"group"`
			Mode  *int   `json:"mode"`
		}
		d := json.NewDecoder(io.LimitReader(part, 64<<10))
		d.DisallowUnknownFields()
		mode, ok := fs.FileMode(0), false
		if err = d.Decode(&meta); err == nil {
			mode, ok = octal(meta.Mode)
		}
		if err != nil || !filepath.IsAbs(meta.Path) || !ok {
			e.s.violation(w, "upload: bad metadata %+v: %v", meta, err)
			return
		}
		part, err = mr.NextPart()
		if err != nil || part.FormName() != "file" {
			e.s.violation(w, "upload: metadata for %s not followed by its file part: %v", meta.Path, err)
			return
		}
		// As execd: the parents are made, the file truncated and
		// written (through a symlink at the path), then chmodded.
		if err := os.MkdirAll(filepath.Dir(meta.Path), 0o777); err != nil {
			fsError(w, err)
			return
		}
		f, err := os.OpenFile(meta.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o777)
		if err != nil {
			fsError(w, err)
			return
		}
		_, err = io.Copy(f, part)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && mode != 0 {
			err = os.Chmod(meta.Path, mode)
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
	}
}
