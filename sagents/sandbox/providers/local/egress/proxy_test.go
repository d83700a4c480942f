package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/egress"
)

// MapResolver answers from a map; unknown names do not exist.
type MapResolver map[string][]netip.Addr

func (m MapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

// upstream is an HTTP server on 127.0.0.2 standing in for a domain.
type upstream struct {
	port  int
	hits  atomic.Int32
	close func()
}

func newUpstream(t testing.TB, ip string, h http.Handler) *upstream {
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err)
	u := &upstream{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	u.close = func() { srv.Close() }
	t.Cleanup(u.close)
	return u
}

func hello(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) }

// events collects what the proxy reports.
type events struct {
	mu  sync.Mutex
	all []egress.Event
}

func (e *events) observe(ev egress.Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

func (e *events) last() egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.all) == 0 {
		return egress.Event{}
	}
	return e.all[len(e.all)-1]
}

type fixture struct {
	httpURL   *url.URL
	socksAddr string
	ev        *events
	proxy     *egress.Proxy
}

func newFixture(t testing.TB, allow, deny []string, res egress.Resolver) *fixture {
	pol, err := egress.NewPolicy(allow, deny)
	require.NoError(t, err)
	f := &fixture{ev: &events{}}
	f.proxy = egress.New(egress.Options{Policy: pol, Resolver: res, Observer: f.ev.observe, DialTimeout: 3 * time.Second})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.proxy.Serve(hl, sl)
	t.Cleanup(func() { f.proxy.Close() })
	f.httpURL = &url.URL{Scheme: "http", Host: hl.Addr().String()}
	f.socksAddr = sl.Addr().String()
	return f
}

func (f *fixture) client() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.httpURL),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second}
}

func get(t testing.TB, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestAllowedDomainOverHTTP(t *testing.T) {
	up := newUpstream(t, "127.0.0.2", http.HandlerFunc(hello))
	f := newFixture(t, []string{"allowed.test:*", "127.0.0.2:*"}, nil, MapResolver{"allowed.test": addrs("127.0.0.2")})
	resp, body := get(t, f.client(), fmt.Sprintf("http://allowed.test:%d/x", up.port))
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, fmt.Sprintf("hello allowed.test:%d", up.port), body)
	ev := f.ev.last()
	assert.Equal(t, egress.Event{Protocol: "http", Domain: "allowed.test", Port: up.port, Allowed: true,
		Rule: "allowed.test:*", Reason: "allowed by rule allowed.test:*", Address: netip.MustParseAddr("127.0.0.2")}, ev)
}

func TestAllowedDomainOverCONNECTWithTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(hello))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := ln.Addr().(*net.TCPAddr).Port
	f := newFixture(t, []string{"secure.test:" + strconv.Itoa(port), "127.0.0.2:*"}, nil, MapResolver{"secure.test": addrs("127.0.0.2")})
	resp, body := get(t, f.client(), fmt.Sprintf("https://secure.test:%d/", port))
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, "hello secure.test")
	assert.Equal(t, "connect", f.ev.last().Protocol)
	assert.True(t, f.ev.last().Allowed)
}

func TestDeniedDomainGets403NamingTheRule(t *testing.T) {
	up := newUpstream(t, "127.0.0.2", http.HandlerFunc(hello))
	f := newFixture(t, []string{"*.blocked.test:*", "127.0.0.2:*"}, []string{"*.evil.blocked.test"},
		MapResolver{"x.evil.blocked.test": addrs("127.0.0.2")})
	for _, u := range []string{fmt.Sprintf("http://x.evil.blocked.test:%d/", up.port), fmt.Sprintf("https://x.evil.blocked.test:%d/", up.port)} {
		resp, err := f.client().Get(u)
		if strings.HasPrefix(u, "https") {
			// the client reports a refused CONNECT as an error carrying the status
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Forbidden")
			continue
		}
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 403, resp.StatusCode)
		assert.Equal(t, "denied by rule *.evil.blocked.test", resp.Header.Get(egress.BlockedHeader))
	}
	ev := f.ev.last()
	assert.False(t, ev.Allowed)
	assert.Equal(t, "*.evil.blocked.test", ev.Rule)
	assert.Zero(t, up.hits.Load())
}

func TestRawConnectRefusalHasTheHeader(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:8443"}, nil, MapResolver{"allowed.test": addrs("93.184.216.34")})
	status, hdr := rawConnect(t, f.httpURL.Host, "allowed.test:22")
	assert.Equal(t, 403, status, "a CONNECT to a port no rule allows")
	assert.Equal(t, "no allow rule matches allowed.test:22", hdr.Get(egress.BlockedHeader))
	assert.Equal(t, egress.Event{Protocol: "connect", Domain: "allowed.test", Port: 22,
		Reason: "no allow rule matches allowed.test:22"}, f.ev.last())
}

func rawConnect(t *testing.T, proxy, target string) (int, http.Header) {
	c, err := net.Dial("tcp", proxy)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header
}

// A name the rules allow that resolves to 127.0.0.1 (DNS rebinding) is
// refused: the resolved address is checked, and no rule names it.
func TestDNSRebindingToLoopbackIsRefused(t *testing.T) {
	up := newUpstream(t, "127.0.0.1", http.HandlerFunc(hello))
	res := MapResolver{"rebind.test": addrs("127.0.0.1"), "meta.test": addrs("169.254.169.254"),
		"mixed.test": addrs("127.0.0.1", "10.1.2.3")}
	f := newFixture(t, []string{"rebind.test:*", "meta.test:*", "mixed.test:*"}, nil, res)
	resp, _ := get(t, f.client(), fmt.Sprintf("http://rebind.test:%d/", up.port))
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, resp.Header.Get(egress.BlockedHeader), "127.0.0.1 is loopback")
	resp, _ = get(t, f.client(), "http://meta.test/latest/meta-data/")
	assert.Contains(t, resp.Header.Get(egress.BlockedHeader), "cloud metadata")
	resp, _ = get(t, f.client(), fmt.Sprintf("http://127.0.0.1:%d/", up.port))
	assert.Equal(t, 403, resp.StatusCode, "a literal loopback address needs its own rule")
	status, _ := rawConnect(t, f.httpURL.Host, fmt.Sprintf("mixed.test:%d", up.port))
	assert.Equal(t, 403, status)
	assert.Zero(t, up.hits.Load())
}

func TestUnknownNameIsRefused(t *testing.T) {
	f := newFixture(t, []string{"nx.test"}, nil, MapResolver{})
	resp, _ := get(t, f.client(), "http://nx.test/")
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, resp.Header.Get(egress.BlockedHeader), "cannot resolve nx.test")
}

func TestLargeDownloadThroughBothProxies(t *testing.T) {
	const size = 64 << 20
	up := newUpstream(t, "127.0.0.2", zeros(size))
	f := newFixture(t, []string{"big.test:*", "127.0.0.2:*"}, nil, MapResolver{"big.test": addrs("127.0.0.2")})
	resp, err := f.client().Get(fmt.Sprintf("http://big.test:%d/", up.port))
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.EqualValues(t, size, n)

	c := socksDial(t, f.socksAddr, "big.test", up.port)
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: big.test\r\nConnection: close\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	n, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	assert.EqualValues(t, size, n)
}

func zeros(n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for left := n; left > 0; {
			k := min(left, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			left -= k
		}
	})
}

func TestManyParallelConnections(t *testing.T) {
	up := newUpstream(t, "127.0.0.2", http.HandlerFunc(hello))
	f := newFixture(t, []string{"par.test:*", "127.0.0.2:*"}, nil, MapResolver{"par.test": addrs("127.0.0.2")})
	const n = 200
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				resp, err := f.client().Get(fmt.Sprintf("http://par.test:%d/%d", up.port, i))
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if strings.HasPrefix(string(b), "hello") {
						ok.Add(1)
					}
				}
				return
			}
			c, err := socksConnect(f.socksAddr, "par.test", up.port)
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: par.test\r\nConnection: close\r\n\r\n")
			if b, _ := io.ReadAll(c); strings.Contains(string(b), "hello par.test") {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, n, ok.Load())
	assert.EqualValues(t, n, up.hits.Load())
}

func TestSOCKS5(t *testing.T) {
	up := newUpstream(t, "127.0.0.2", http.HandlerFunc(hello))
	f := newFixture(t, []string{"ok.test:*", "127.0.0.2:*"}, []string{"no.test"},
		MapResolver{"ok.test": addrs("127.0.0.2"), "no.test": addrs("127.0.0.2"), "rebind.test": addrs("127.0.0.1")})
	c := socksDial(t, f.socksAddr, "ok.test", up.port)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: ok.test\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	assert.Contains(t, string(b), "hello ok.test")
	for _, host := range []string{"no.test", "rebind.test", "127.0.0.1"} {
		_, err := socksConnect(f.socksAddr, host, up.port)
		assert.ErrorContains(t, err, "reply 2", host)
	}
	assert.Equal(t, "socks5", f.ev.last().Protocol)
	assert.EqualValues(t, 1, up.hits.Load())
}

func TestCloseCutsOpenTunnels(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	up := newUpstream(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-block
	}))
	f := newFixture(t, []string{"slow.test:*", "127.0.0.2:*"}, nil, MapResolver{"slow.test": addrs("127.0.0.2")})
	c := socksDial(t, f.socksAddr, "slow.test", up.port)
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: slow.test\r\n\r\n")
	br := bufio.NewReader(c)
	_, err := br.ReadString('\n')
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.proxy.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on an open tunnel")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(br)
	assert.NoError(t, err, "the tunnel ends with EOF, not a timeout")
}

func socksDial(t testing.TB, proxy, host string, port int) net.Conn {
	t.Helper()
	c, err := socksConnect(proxy, host, port)
	require.NoError(t, err)
	return c
}

// socksConnect is a minimal SOCKS5 client (domain-name CONNECT).
func socksConnect(proxy, host string, port int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(append(req, host...), 0, 0)
	binary.BigEndian.PutUint16(req[len(req)-2:], uint16(port))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	var rep [12]byte
	if _, err := io.ReadFull(c, rep[:2]); err != nil || rep[1] != 0 {
		c.Close()
		return nil, fmt.Errorf("socks greeting: %v %v", rep[:2], err)
	}
	if _, err := io.ReadFull(c, rep[:10]); err != nil {
		c.Close()
		return nil, fmt.Errorf("socks reply: %w", err)
	}
	if rep[1] != 0 {
		c.Close()
		return nil, fmt.Errorf("socks reply %d", rep[1])
	}
	return c, nil
}

// Issue 35, item 6: a CONNECT tunnel that carries nothing ends after the
// idle timeout (each listener serves 256 connections at most: idle ones
// held their places for ever); one that carries a byte now and then,
// for several timeouts in all, stays open (the control).
func TestIdleTunnelsEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	pol, err := egress.NewPolicy([]string{"echo.test:*", "127.0.0.2:*"}, nil)
	require.NoError(t, err)
	p := egress.New(egress.Options{Policy: pol, Resolver: MapResolver{"echo.test": addrs("127.0.0.2")}, IdleTimeout: 300 * time.Millisecond})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.Serve(hl, nil)
	defer p.Close()
	tunnel := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", hl.Addr().String())
		require.NoError(t, err)
		target := fmt.Sprintf("echo.test:%d", port)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		return c, br
	}

	busy, br := tunnel()
	defer busy.Close()
	for i := range 12 { // 1.2 s: four idle timeouts
		_, err := busy.Write([]byte{byte('a' + i)})
		require.NoError(t, err)
		busy.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := br.ReadByte()
		require.NoError(t, err, "control: a tunnel in use was cut")
		assert.Equal(t, byte('a'+i), b)
		time.Sleep(100 * time.Millisecond)
	}

	quiet, qr := tunnel()
	defer quiet.Close()
	quiet.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = qr.ReadByte()
	require.ErrorIs(t, err, io.EOF, "an idle tunnel was still open after many idle timeouts")
}
