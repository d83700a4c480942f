package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// serveFlags are the flags of the HTTP services (sandboxd, provisioner).
type serveFlags struct {
	listen        string
	grace         time.Duration
	headerTimeout time.Duration
}

func (f *serveFlags) register(fs *flag.FlagSet, defaultListen string) {
	fs.StringVar(&f.listen, "listen", defaultListen, "address to listen on (port 0 picks one; the bound address is printed on stdout)")
	fs.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running requests may finish")
	fs.DurationVar(&f.headerTimeout, "read-header-timeout", 10*time.Second, "limit for reading request headers")
}

// check refuses a --listen address no socket can bind (a port out of
// range, an IPv4 address with a part over 255) and a negative grace or
// header timeout, before the loopback rules look at it.
func (f *serveFlags) check() error {
	host, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, such as 127.0.0.1:8080 or [::1]:0", f.listen)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (port != "0" && n == 0) {
		return fmt.Errorf("--listen %s: port %q: want a number from 0 to 65535 (0 picks one)", f.listen, port)
	}
	if host != "" && net.ParseIP(host) == nil && strings.Trim(host, "0123456789.") == "" {
		return fmt.Errorf("--listen %s: %q is not an IPv4 address (four numbers 0-255), such as 127.0.0.1", f.listen, host)
	}
	if f.grace < 0 || f.headerTimeout <= 0 {
		return errors.New("--shutdown-grace must be >= 0 and --read-header-timeout > 0")
	}
	return nil
}
