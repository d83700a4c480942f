package aioapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sage-go/sage/internal/sagehome"
)

// maxTokenFile bounds the token file read.
const maxTokenFile = 4096

// TokenFile is where `sage sandboxd` keeps the bearer token it generates
// when none is configured: $SAGE_HOME/sandboxd/token (mode 0600, in a
// 0700 directory).
func TokenFile() string { return filepath.Join(sagehome.Dir(), "sandboxd", "token") }

// ReadTokenFile reads a token file: a regular file (not a symlink) that
// no other user can read, holding one token. A missing file is
// fs.ErrNotExist.
func ReadTokenFile(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("aio: token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("aio: token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("aio: token file %s is not a regular file: remove it", p)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("aio: token file %s is readable by other users (mode %v): chmod 600 it or remove it", p, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("aio: token file %s: %w", p, err)
	}
	tok := string(bytes.TrimSpace(b))
	if len(b) > maxTokenFile || tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("aio: token file %s does not hold one token: remove it (sandboxd makes a new one)", p)
	}
	return tok, nil
}

// loopbackURL reports whether serverURL's host is localhost or a
// loopback address.
func loopbackURL(serverURL string) bool {
	u, err := url.Parse(serverURL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// LocalToken is the token of a sandboxd on this machine: TokenFile for a
// loopback URL, "" when there is none.
func LocalToken(serverURL string) (string, error) {
	if !loopbackURL(serverURL) {
		return "", nil
	}
	tok, err := ReadTokenFile(TokenFile())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return tok, err
}
