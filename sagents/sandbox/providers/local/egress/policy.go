package egress

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Policy holds the parsed rules; deny is checked first.
type Policy struct {
	Allow, Deny []driver.EgressRule
}

// NewPolicy parses allowed_domains and denied_domains.
func NewPolicy(allow, deny []string) (Policy, error) {
	a, err := driver.ParseEgressRules(allow, "allowed_domains")
	if err != nil {
		return Policy{}, err
	}
	d, err := driver.ParseEgressRules(deny, "denied_domains")
	if err != nil {
		return Policy{}, err
	}
	return Policy{Allow: a, Deny: d}, nil
}

// Verdict is the outcome of a check: the rule that decided (empty when
// none did) and a one-line reason.
type Verdict struct {
	Allowed bool
	Rule    string
	Reason  string
}

func denied(rule string, format string, args ...any) Verdict {
	return Verdict{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// CheckName decides on a normalized host and a port before resolution.
func (p Policy) CheckName(host string, port int) Verdict {
	for _, r := range p.Deny {
		if r.MatchHost(host) && r.MatchPort(port, true) {
			return denied(r.Text, "denied by rule %s", r.Text)
		}
	}
	for _, r := range p.Allow {
		if r.MatchHost(host) && r.MatchPort(port, false) {
			return Verdict{Allowed: true, Rule: r.Text, Reason: "allowed by rule " + r.Text}
		}
	}
	return denied("", "no allow rule matches %s", hostPort(host, port))
}

// CheckAddr decides on one resolved address: deny rules that name it,
// then special addresses, which need an allow rule naming the address.
func (p Policy) CheckAddr(ip netip.Addr, port int) Verdict {
	ip = ip.Unmap()
	host := ip.String()
	for _, r := range p.Deny {
		if r.IP == ip && r.MatchPort(port, true) {
			return denied(r.Text, "denied by rule %s", r.Text)
		}
	}
	kind := SpecialAddr(ip)
	if kind == "" {
		return Verdict{Allowed: true}
	}
	for _, r := range p.Allow {
		if r.IP == ip && r.MatchPort(port, false) {
			return Verdict{Allowed: true, Rule: r.Text, Reason: "allowed by rule " + r.Text}
		}
	}
	return denied("", "address %s is %s; only an allow rule naming it (e.g. %s:%d) lets it through", host, kind, bracket(ip), port)
}

func hostPort(host string, port int) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		host = bracket(ip)
	}
	return host + ":" + strconv.Itoa(port)
}

func bracket(ip netip.Addr) string {
	if ip.Is6() {
		return "[" + ip.String() + "]"
	}
	return ip.String()
}
