package dockerbackend

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// defaultMirror is the Debian archive used when the machine's apt
// sources name none.
const defaultMirror = "http://deb.debian.org/debian"

// maxSourcesFile bounds how much of one apt sources file is read.
const maxSourcesFile = 1 << 20

// aptMirror returns the Debian archive the machine's apt uses: the first
// "deb" source of aptDir/sources.list, then of aptDir/sources.list.d/
// (*.list one-line entries and *.sources deb822 stanzas, in name order)
// whose suite is a release, not -security, -updates or -backports.
// Without one it returns defaultMirror.
func aptMirror(aptDir string) string {
	files := []string{filepath.Join(aptDir, "sources.list")}
	more, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*"))
	sort.Strings(more)
	files = append(files, more...)
	for _, f := range files {
		var uri string
		switch {
		case strings.HasSuffix(f, ".sources"):
			uri = mirrorDeb822(readBounded(f))
		case strings.HasSuffix(f, ".list") || f == files[0]:
			uri = mirrorOneLine(readBounded(f))
		}
		if uri != "" {
			return uri
		}
	}
	return defaultMirror
}

func readBounded(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxSourcesFile))
	return string(b)
}

// releaseSuite is a suite debootstrap can start from.
func releaseSuite(s string) bool {
	for _, suf := range []string{"-security", "-updates", "-backports", "-proposed-updates"} {
		if strings.HasSuffix(s, suf) {
			return false
		}
	}
	return s != "" && !strings.Contains(s, "/")
}

func usableURI(u string) bool {
	return (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) && !strings.Contains(u, "security")
}

// mirrorOneLine reads "deb [options] URI suite components" lines.
func mirrorOneLine(text string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // [arch=amd64 signed-by=...]
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && usableURI(f[0]) && releaseSuite(f[1]) {
			return strings.TrimRight(f[0], "/")
		}
	}
	return ""
}

// mirrorDeb822 reads stanzas of Types:, URIs:, Suites: fields.
func mirrorDeb822(text string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		fields := map[string][]string{}
		enabled := true
		sc := bufio.NewScanner(strings.NewReader(stanza))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			k = strings.ToLower(strings.TrimSpace(k))
			fields[k] = strings.Fields(v)
			if k == "enabled" && len(fields[k]) > 0 && strings.EqualFold(fields[k][0], "no") {
				enabled = false
			}
		}
		if !enabled || !contains(fields["types"], "deb") {
			continue
		}
		var suite string
		for _, s := range fields["suites"] {
			if releaseSuite(s) {
				suite = s
				break
			}
		}
		if suite == "" {
			continue
		}
		for _, u := range fields["uris"] {
			if usableURI(u) {
				return strings.TrimRight(u, "/")
			}
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostSuite is VERSION_CODENAME from an os-release file, else bookworm.
func hostSuite(osRelease string) string {
	sc := bufio.NewScanner(strings.NewReader(readBounded(osRelease)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VERSION_CODENAME="); ok {
			if v = strings.Trim(v, `"'`); validPackage(v) {
				return v
			}
		}
	}
	return "bookworm"
}
