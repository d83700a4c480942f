package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkTransfer100MB downloads 100 MB from a loopback server directly
// and through the proxy (plain HTTP, and a CONNECT tunnel), in the same
// run, and reports each throughput, the proxy/direct ratio, and the
// added latency of a small request on a fresh connection.
func BenchmarkTransfer100MB(b *testing.B) {
	const size = 100 << 20
	up := newUpstream(b, "127.0.0.2", zeros(size))
	small := newUpstream(b, "127.0.0.2", http.HandlerFunc(hello))
	f := newFixture(b, []string{"bench.test:*", "127.0.0.2:*"}, nil, MapResolver{"bench.test": addrs("127.0.0.2")})
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	viaHTTP := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.httpURL), DisableKeepAlives: true}}
	var dT, hT, cT, dL, hL time.Duration
	b.SetBytes(size)
	for b.Loop() {
		dT += timed(b, direct, fmt.Sprintf("http://127.0.0.2:%d/", up.port), size)
		hT += timed(b, viaHTTP, fmt.Sprintf("http://bench.test:%d/", up.port), size)
		cT += timedTunnel(b, f.httpURL.Host, up.port, size)
		for range 20 {
			dL += timed(b, direct, fmt.Sprintf("http://127.0.0.2:%d/", small.port), -1)
			hL += timed(b, viaHTTP, fmt.Sprintf("http://bench.test:%d/", small.port), -1)
		}
	}
	n := float64(b.N)
	mbps := func(d time.Duration) float64 { return size / 1e6 / (d.Seconds() / n) }
	b.ReportMetric(mbps(dT), "direct-MB/s")
	b.ReportMetric(mbps(hT), "http-proxy-MB/s")
	b.ReportMetric(mbps(cT), "connect-MB/s")
	b.ReportMetric(hT.Seconds()/dT.Seconds(), "http/direct-time")
	b.ReportMetric(cT.Seconds()/dT.Seconds(), "connect/direct-time")
	b.ReportMetric(float64(dL.Microseconds())/n/20, "direct-req-µs")
	b.ReportMetric(float64((hL-dL).Microseconds())/n/20, "added-req-µs")
}

// timed GETs u and reads the body; want < 0 skips the length check.
func timed(b *testing.B, c *http.Client, u string, want int64) time.Duration {
	start := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || (want >= 0 && n != want) {
		b.Fatalf("%s: %d bytes, %v", u, n, err)
	}
	return time.Since(start)
}

// timedTunnel GETs through a CONNECT tunnel (what HTTPS clients use);
// the request inside is plain HTTP so that TLS does not blur the figure.
func timedTunnel(b *testing.B, proxy string, port int, want int64) time.Duration {
	start := time.Now()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	target := fmt.Sprintf("bench.test:%d", port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	if resp, err = http.ReadResponse(br, nil); err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != want {
		b.Fatalf("tunnel: %d bytes, %v", n, err)
	}
	return time.Since(start)
}
