package sessiond

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A daemon does not take a peer of its own uid for a client outside
// every sandbox: a sandbox that sees the daemon's socket (through a
// mount that covers SAGE_HOME, say) can connect to it as that uid. Each
// daemon makes a key of its own when it starts, in its directory (0600),
// and serves a request only with that key: a client proves it reads the
// daemon's directory, which local mode keeps out of every sandbox (no
// mount and no workspace may cover SAGE_HOME, or show a session daemon's
// directory). Linux daemons also check that the peer runs in their own
// user and mount namespaces (peerNamespaces), which no sandboxed process
// does.

// keyName is the key's file in the daemon directory.
const keyName = "key"

// maxKey bounds the key file read.
const maxKey = 256

// newKey makes the daemon's key and writes it to dir (never over a file
// already there: removeLeftovers removed a dead daemon's).
func newKey(dir string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	key := hex.EncodeToString(b)
	f, err := os.OpenFile(filepath.Join(dir, keyName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(key); err != nil {
		f.Close()
		return "", err
	}
	return key, f.Close()
}

// readKey is the key of the daemon of dir, "" when there is none (a
// daemon of a version before keys ignores the field).
func readKey(dir string) string {
	f, err := os.Open(filepath.Join(dir, keyName))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxKey))
	return strings.TrimSpace(string(b))
}

// keyMatches compares a request's key with the daemon's in constant time.
func keyMatches(want, got string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
