package egress

import (
	"context"
	"io"
	"net/http"
	"strings"
)

// BlockedHeader names the rule or reason of a refusal.
const BlockedHeader = "X-Sage-Blocked"

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.serveConnect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "sage egress proxy: want an absolute http:// URL (https goes through CONNECT)", http.StatusBadRequest)
		return
	}
	host, port, err := splitPort(r.URL.Host, 80)
	if err != nil {
		http.Error(w, "sage egress proxy: "+oneLine(err.Error()), http.StatusBadRequest)
		return
	}
	addrs, v := p.decide(r.Context(), "http", host, port)
	if !v.Allowed {
		blocked(w, v)
		return
	}
	out := r.Clone(context.WithValue(r.Context(), pinKey{}, pinned{addrs, port}))
	out.RequestURI = ""
	removeHopHeaders(out.Header)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "sage egress proxy: "+oneLine(err.Error()), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitPort(r.Host, 0)
	if err != nil {
		http.Error(w, "sage egress proxy: CONNECT wants host:port", http.StatusBadRequest)
		return
	}
	addrs, v := p.decide(r.Context(), "connect", host, port)
	if !v.Allowed {
		blocked(w, v)
		return
	}
	up, err := p.dial(r.Context(), addrs, port)
	if err != nil {
		http.Error(w, "sage egress proxy: "+oneLine(err.Error()), http.StatusBadGateway)
		return
	}
	rc := http.NewResponseController(w)
	conn, buf, err := rc.Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "sage egress proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		up.Close()
		return
	}
	if n := buf.Reader.Buffered(); n > 0 {
		early, _ := buf.Reader.Peek(n)
		if _, err := up.Write(early); err != nil {
			conn.Close()
			up.Close()
			return
		}
	}
	p.splice(conn, up)
}

// blocked answers 403 with the reason in X-Sage-Blocked.
func blocked(w http.ResponseWriter, v Verdict) {
	w.Header().Set(BlockedHeader, oneLine(v.Reason))
	http.Error(w, "sage egress proxy: blocked: "+oneLine(v.Reason), http.StatusForbidden)
}

// hopHeaders are per-connection headers a proxy must not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, k := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(k))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}
