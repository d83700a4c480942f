package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Resolver looks names up; *net.Resolver is one. Tests map names to
// 127.0.0.x with their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Event is one egress decision, for logs and observability.
type Event struct {
	Protocol string     // "http", "connect" or "socks5"
	Domain   string     // the host as asked for (normalized when valid)
	Port     int        //
	Allowed  bool       //
	Rule     string     // the rule that decided, empty when none did
	Reason   string     // one line: "denied by rule *.example.com", ...
	Address  netip.Addr // the address dialed, when allowed
}

// Observer receives every decision. It is called synchronously on the
// request's goroutine and must not block.
type Observer func(Event)

// Options configure a Proxy.
type Options struct {
	Policy      Policy
	Resolver    Resolver      // nil: net.DefaultResolver
	Observer    Observer      // nil: decisions are not reported
	DialTimeout time.Duration // 0: 10s
	// IdleTimeout ends a tunnel (CONNECT or SOCKS5) that carried no byte
	// either way for that long, so idle tunnels do not hold the
	// listener's MaxConns places for ever (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is Options.IdleTimeout's default.
const DefaultIdleTimeout = 5 * time.Minute

// Proxy serves the HTTP and SOCKS5 proxies. Create it with New, start it
// with Serve, stop it with Close.
type Proxy struct {
	opts   Options
	dialer net.Dialer
	http   *http.Server
	tr     *http.Transport

	mu     sync.Mutex
	conns  map[io.Closer]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New makes a Proxy.
func New(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	p := &Proxy{opts: o, dialer: net.Dialer{Timeout: o.DialTimeout}, conns: map[io.Closer]struct{}{}}
	p.tr = &http.Transport{Proxy: nil, DialContext: p.dialPinned, DisableKeepAlives: true,
		ResponseHeaderTimeout: 0, MaxResponseHeaderBytes: 1 << 20}
	p.http = &http.Server{Handler: http.HandlerFunc(p.serveHTTP), ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute}
	return p
}

// Serve accepts on the two listeners in the background until Close; a nil
// listener is skipped.
func (p *Proxy) Serve(httpLn, socksLn net.Listener) {
	if httpLn != nil {
		httpLn = netutil.LimitListener(httpLn, MaxConns)
		p.wg.Go(func() { p.http.Serve(httpLn) })
	}
	if socksLn != nil {
		socksLn = netutil.LimitListener(socksLn, MaxConns)
		p.track(socksLn)
		p.wg.Go(func() { p.serveSOCKS(socksLn) })
	}
}

// MaxConns bounds the connections each proxy serves at once, so a sandbox
// cannot exhaust the host process's file descriptors; further clients
// wait in the listen queue.
const MaxConns = 256

// Close stops both proxies and cuts every open tunnel.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.http.Close()
	p.tr.CloseIdleConnections()
	p.wg.Wait()
	return err
}

// track registers c to be closed by Close; it returns false (and closes
// c) when the proxy is closed already.
func (p *Proxy) track(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c io.Closer) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// decide runs the whole check for host:port and reports it; on success it
// returns the addresses that may be dialed, in the resolver's order.
func (p *Proxy) decide(ctx context.Context, proto, host string, port int) ([]netip.Addr, Verdict) {
	ev := Event{Protocol: proto, Domain: host, Port: port}
	addrs, v := p.check(ctx, host, port)
	if h, err := driver.NormalizeHost(host); err == nil {
		ev.Domain = h
	}
	ev.Allowed, ev.Rule, ev.Reason = v.Allowed, v.Rule, v.Reason
	if v.Allowed {
		ev.Address = addrs[0]
	}
	if p.opts.Observer != nil {
		p.opts.Observer(ev)
	}
	return addrs, v
}

func (p *Proxy) check(ctx context.Context, host string, port int) ([]netip.Addr, Verdict) {
	h, err := driver.NormalizeHost(host)
	if err != nil {
		return nil, denied("", "invalid host")
	}
	if port < 1 || port > 65535 {
		return nil, denied("", "invalid port %d", port)
	}
	named := p.opts.Policy.CheckName(h, port)
	if !named.Allowed {
		return nil, named
	}
	addrs, err := p.resolve(ctx, h)
	if err != nil {
		return nil, denied(named.Rule, "cannot resolve %s: %s", h, oneLine(err.Error()))
	}
	var ok []netip.Addr
	last := denied("", "%s has no address", h)
	for _, a := range addrs {
		if v := p.opts.Policy.CheckAddr(a, port); v.Allowed {
			ok = append(ok, a.Unmap())
		} else {
			last = v
		}
	}
	if len(ok) == 0 {
		return nil, last
	}
	return ok, named
}

func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	return p.opts.Resolver.LookupNetIP(ctx, "ip", host)
}

// dial connects to the first address that answers: exactly the checked
// addresses, never the name.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		c, err := p.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("egress: dial: %w", errors.Join(errs...))
}

type pinKey struct{}

type pinned struct {
	addrs []netip.Addr
	port  int
}

// dialPinned is the transport's dialer: it only dials what decide
// returned for this request (carried in the context); without it, nothing.
func (p *Proxy) dialPinned(ctx context.Context, _, _ string) (net.Conn, error) {
	pin, ok := ctx.Value(pinKey{}).(pinned)
	if !ok {
		return nil, errors.New("egress: no checked address for this request")
	}
	return p.dial(ctx, pin.addrs, pin.port)
}

// splice copies both ways until both sides are done, half-closing as it
// goes; Close cuts it, and so does IdleTimeout without a byte either way.
func (p *Proxy) splice(a, b net.Conn) {
	if !p.track(a) || !p.track(b) {
		a.Close()
		b.Close()
		return
	}
	defer func() { p.untrack(a); p.untrack(b); a.Close(); b.Close() }()
	idle := &idleClock{timeout: p.opts.IdleTimeout, conns: [2]net.Conn{a, b}}
	idle.extend()
	done := make(chan struct{})
	go func() { copyHalf(a, b, idle); close(done) }()
	copyHalf(b, a, idle)
	<-done
}

// idleClock moves both connections' deadlines IdleTimeout ahead whenever
// a byte passes (at most every eighth of it, to keep the cost down).
type idleClock struct {
	timeout time.Duration
	conns   [2]net.Conn
	mu      sync.Mutex
	last    time.Time
}

func (c *idleClock) extend() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.last) < c.timeout/8 {
		return
	}
	c.last = now
	for _, conn := range c.conns {
		conn.SetDeadline(now.Add(c.timeout))
	}
}

func copyHalf(dst, src net.Conn, idle *idleClock) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			idle.extend()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// splitPort splits host:port; without a port, def applies (0: required).
func splitPort(hostport string, def int) (string, int, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		bare := !strings.Contains(hostport, ":") || strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]")
		if def == 0 || !bare {
			return "", 0, fmt.Errorf("bad host:port %q", hostport)
		}
		return hostport, def, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, n, nil
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
