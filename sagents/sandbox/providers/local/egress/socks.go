package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 (RFC 1928), CONNECT only, no authentication.
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksNoMethod    = 0xff
	socksConnect     = 1
	socksIPv4        = 1
	socksDomain      = 3
	socksIPv6        = 4
	socksOK          = 0
	socksNotAllowed  = 2
	socksHostUnreach = 4
	socksCmdUnsupp   = 7
	socksAddrUnsupp  = 8
)

// handshakeTimeout bounds a client that connects and says nothing.
const handshakeTimeout = 30 * time.Second

func (p *Proxy) serveSOCKS(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.socksConn(c)
	}
}

func (p *Proxy) socksConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	host, port, err := socksHandshake(c)
	if err != nil {
		c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.DialTimeout)
	defer cancel()
	addrs, v := p.decide(ctx, "socks5", host, port)
	if !v.Allowed {
		socksReply(c, socksNotAllowed)
		c.Close()
		return
	}
	up, err := p.dial(ctx, addrs, port)
	if err != nil {
		socksReply(c, socksHostUnreach)
		c.Close()
		return
	}
	if socksReply(c, socksOK) != nil {
		c.Close()
		up.Close()
		return
	}
	c.SetDeadline(time.Time{})
	p.splice(c, up)
}

// socksHandshake reads the greeting and the request; it answers the
// greeting itself and replies to requests it cannot serve.
func socksHandshake(c net.Conn) (string, int, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != socksVersion {
		return "", 0, fmt.Errorf("egress: socks: bad greeting")
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return "", 0, err
	}
	if !hasByte(methods, socksNoAuth) {
		c.Write([]byte{socksVersion, socksNoMethod})
		return "", 0, errors.New("egress: socks: client wants authentication")
	}
	if _, err := c.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return "", 0, err
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != socksVersion {
		return "", 0, fmt.Errorf("egress: socks: bad request")
	}
	host, err := socksAddr(c, req[3])
	if err != nil {
		socksReply(c, socksAddrUnsupp)
		return "", 0, err
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return "", 0, err
	}
	if req[1] != socksConnect {
		socksReply(c, socksCmdUnsupp)
		return "", 0, errors.New("egress: socks: only CONNECT")
	}
	return host, int(binary.BigEndian.Uint16(port[:])), nil
}

func socksAddr(c net.Conn, atyp byte) (string, error) {
	switch atyp {
	case socksIPv4, socksIPv6:
		b := make([]byte, map[byte]int{socksIPv4: 4, socksIPv6: 16}[atyp])
		if _, err := io.ReadFull(c, b); err != nil {
			return "", err
		}
		ip, _ := netip.AddrFromSlice(b)
		return ip.Unmap().String(), nil
	case socksDomain:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return "", err
		}
		b := make([]byte, n[0])
		_, err := io.ReadFull(c, b)
		return string(b), err
	}
	return "", fmt.Errorf("egress: socks: address type %d", atyp)
}

// socksReply sends a reply with an unspecified bound address.
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

func hasByte(b []byte, x byte) bool {
	for _, y := range b {
		if y == x {
			return true
		}
	}
	return false
}
