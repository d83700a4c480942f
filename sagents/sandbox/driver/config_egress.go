package driver

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// EgressRule is one entry of allowed_domains or denied_domains:
//
//	example.com         the name itself
//	*.example.com       any name below example.com (not example.com itself)
//	203.0.113.7, ::1    an address (the only way to allow a private,
//	                    loopback or link-local destination)
//	RULE:443            only that port
//	RULE:*              any port
//
// Without a port an allow rule covers ports 80 and 443 and a deny rule
// covers every port. IPv6 addresses with a port are bracketed: [::1]:8080.
type EgressRule struct {
	Text     string     // the entry as written
	Host     string     // lower-case name without "*.", or the canonical address
	Wildcard bool       // "*.": subdomains only
	IP       netip.Addr // valid when the rule names an address
	Port     int        // 0: default ports, -1: any port, else that port
}

// AnyPort is EgressRule.Port for "host:*".
const AnyPort = -1

// ParseEgressRule parses one allowed_domains / denied_domains entry.
func ParseEgressRule(s string) (EgressRule, error) {
	r := EgressRule{Text: s}
	host, port, err := splitRulePort(strings.TrimSpace(s))
	if err != nil {
		return EgressRule{}, err
	}
	r.Port = port
	if strings.HasPrefix(host, "*.") {
		r.Wildcard, host = true, host[2:]
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() == "" {
		if r.Wildcard {
			return EgressRule{}, fmt.Errorf("a wildcard applies to names, not to the address %s", host)
		}
		r.IP, r.Host = ip.Unmap(), ip.Unmap().String()
		return r, nil
	}
	if host == "*" || host == "" {
		return EgressRule{}, fmt.Errorf("want a domain, *.domain or an address (use network: open for everything)")
	}
	if r.Host, err = NormalizeHost(host); err != nil {
		return EgressRule{}, err
	}
	if _, err := netip.ParseAddr(r.Host); err == nil {
		return EgressRule{}, fmt.Errorf("%q is an address, not a name", host)
	}
	if r.Wildcard && !strings.Contains(r.Host, ".") {
		return EgressRule{}, fmt.Errorf("*.%s covers a whole top-level domain", r.Host)
	}
	return r, nil
}

// splitRulePort splits "host", "host:port", "host:*", "[v6]:port" and a
// bare IPv6 address.
func splitRulePort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, fmt.Errorf("missing ]")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("want [address]:port")
		}
		p, err := parseRulePort(rest[1:])
		return host, p, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // a bare IPv6 address
	}
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	p, err := parseRulePort(port)
	return host, p, err
}

func parseRulePort(s string) (int, error) {
	if s == "*" {
		return AnyPort, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("port %q: want 1-65535 or *", s)
	}
	return n, nil
}

// String is the rule in canonical form.
func (r EgressRule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	}
	if r.IP.Is6() && r.Port != 0 {
		h = "[" + h + "]"
	}
	switch r.Port {
	case 0:
		return h
	case AnyPort:
		return h + ":*"
	}
	return h + ":" + strconv.Itoa(r.Port)
}

// MatchHost reports whether the rule names host (as NormalizeHost
// returns it).
func (r EgressRule) MatchHost(host string) bool {
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	return host == r.Host
}

// MatchPort reports whether the rule covers port; deny says which
// default applies to a rule without a port.
func (r EgressRule) MatchPort(port int, deny bool) bool {
	switch r.Port {
	case AnyPort:
		return true
	case 0:
		return deny || port == 80 || port == 443
	}
	return port == r.Port
}

// NormalizeHost lower-cases a host name, drops a trailing dot and checks
// its syntax (labels of letters, digits, - and _, at most 253 bytes, the
// last one not all digits).
// Addresses, bracketed or not, come back in canonical form.
func NormalizeHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ".")
	if ip, err := netip.ParseAddr(h); err == nil && ip.Zone() == "" {
		return ip.Unmap().String(), nil
	}
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("host %q: want 1-253 characters", h)
	}
	labels := strings.Split(h, ".")
	for _, label := range labels {
		if err := checkLabel(label); err != nil {
			return "", fmt.Errorf("host %q: %w", h, err)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		// no top-level domain is numeric; "127.1" is an address in disguise
		return "", fmt.Errorf("host %q: neither a name nor an address", h)
	}
	return h, nil
}

func checkLabel(l string) error {
	if l == "" || len(l) > 63 {
		return fmt.Errorf("label %q: want 1-63 characters", l)
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with -", l)
	}
	for _, c := range []byte(l) {
		if !(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
			return fmt.Errorf("label %q: character %q not allowed", l, c)
		}
	}
	return nil
}

// ParseEgressRules parses a list; field names the list in errors
// ("sandbox.local.allowed_domains" gives "...allowed_domains[2]").
func ParseEgressRules(list []string, field string) ([]EgressRule, error) {
	out := make([]EgressRule, 0, len(list))
	for i, s := range list {
		r, err := ParseEgressRule(s)
		if err != nil {
			return nil, &ConfigError{Field: fmt.Sprintf("%s[%d]", field, i), Value: s, Reason: err.Error()}
		}
		out = append(out, r)
	}
	return out, nil
}
