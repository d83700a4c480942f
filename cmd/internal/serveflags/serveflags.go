// Package serveflags holds the flags every HTTP service of the project's
// programs takes (sage sandboxd, sage provisioner, sage-provisioner):
// the address to listen on, the shutdown grace and the header timeout.
package serveflags

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Flags are the flags of an HTTP service.
type Flags struct {
	Listen            string        // --listen HOST:PORT
	ShutdownGrace     time.Duration // --shutdown-grace
	ReadHeaderTimeout time.Duration // --read-header-timeout
}

// Register defines the flags on fs, --listen defaulting to defaultListen.
func (f *Flags) Register(fs *flag.FlagSet, defaultListen string) {
	fs.StringVar(&f.Listen, "listen", defaultListen, "address to listen on (port 0 picks one; the bound address is printed on stdout)")
	fs.DurationVar(&f.ShutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running requests may finish")
	fs.DurationVar(&f.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "limit for reading request headers")
}

// Check refuses a --listen address no socket can bind (a port out of
// range, an IPv4 address with a part over 255) and a negative grace or
// header timeout, before the loopback rules look at it.
func (f *Flags) Check() error {
	host, port, err := net.SplitHostPort(f.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, such as 127.0.0.1:8080 or [::1]:0", f.Listen)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (port != "0" && n == 0) {
		return fmt.Errorf("--listen %s: port %q: want a number from 0 to 65535 (0 picks one)", f.Listen, port)
	}
	if host != "" && net.ParseIP(host) == nil && strings.Trim(host, "0123456789.") == "" {
		return fmt.Errorf("--listen %s: %q is not an IPv4 address (four numbers 0-255), such as 127.0.0.1", f.Listen, host)
	}
	if f.ShutdownGrace < 0 || f.ReadHeaderTimeout <= 0 {
		return errors.New("--shutdown-grace must be >= 0 and --read-header-timeout > 0")
	}
	return nil
}
