//go:build darwin

package local

import (
	"fmt"
	"net"
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// listenEgress binds the proxies to TCP ports on 127.0.0.1. macOS has no
// network namespaces, so no bridge and no Unix sockets: the Seatbelt
// profile lets commands connect to these two localhost ports and nowhere
// else. Other local processes can reach the ports too; they get exactly
// what the allowlist grants, which is less than they have already.
func listenEgress(string, *uids.Identity) (*egressProxy, net.Listener, net.Listener, error) {
	h, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("local: egress proxy: %w", err)
	}
	s, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, nil, nil, fmt.Errorf("local: egress proxy: %w", err)
	}
	return &egressProxy{httpAddr: h.Addr().String(), socksAddr: s.Addr().String()}, h, s, nil
}

// isolation is how Seatbelt lets commands reach the proxies: their
// localhost ports. Nil without an allowlist.
func (e *egressProxy) isolation() *isolation.Egress {
	if e == nil {
		return nil
	}
	var ports []int
	for _, a := range []string{e.httpAddr, e.socksAddr} {
		if _, p, err := net.SplitHostPort(a); err == nil {
			n, _ := strconv.Atoi(p)
			ports = append(ports, n)
		}
	}
	return &isolation.Egress{Env: e.env(), Ports: ports}
}
