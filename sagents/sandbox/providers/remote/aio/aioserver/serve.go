package aioserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sage-go/sage/internal/httpserve"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// ServeOptions configure Serve (the one options type of sage's servers).
type ServeOptions = httpserve.ServeOptions

// LoopbackAddr reports whether host:port binds only loopback addresses.
func LoopbackAddr(hostport string) bool { return httpserve.LoopbackAddr(hostport) }

// Serve listens and serves s until ctx is done, then shuts down
// gracefully: readiness goes down, it stops accepting, lets running
// requests finish within ShutdownGrace, cancels the rest (their process
// groups are killed), and closes the server's sessions.
func Serve(ctx context.Context, s *Server, o ServeOptions) error {
	err := httpserve.Serve(ctx, s, httpserve.Options{Name: "sandboxd", ServeOptions: o,
		OnShutdown: func() { s.ready.Store(false) }})
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, s.Close(cctx))
}

// LoadOrCreateToken returns the token saved in file p, or, when there is
// none, saves a new random one there (mode 0600, the directory made 0700)
// and returns it with created set. Two servers starting at once end up
// with the same token.
func LoadOrCreateToken(p string) (token string, created bool, err error) {
	tok, err := aio.ReadTokenFile(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("sandboxd: token directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("sandboxd: token directory: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	tok = hex.EncodeToString(b)
	tmp, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", false, fmt.Errorf("sandboxd: token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(tok + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), p) // never replaces an existing token
	}
	if errors.Is(err, fs.ErrExist) {
		tok, err = aio.ReadTokenFile(p)
		return tok, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("sandboxd: token file: %w", err)
	}
	return tok, true, nil
}
