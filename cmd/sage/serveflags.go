package main

import (
	"flag"
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
