// Package egress is the filtering proxy behind local mode's network
// allowlist: an HTTP proxy (plain requests and CONNECT tunnels) and a
// SOCKS5 proxy that run in the host process and let a sandbox reach only
// the destinations its rules allow.
//
// Every request goes through the same decision:
//
//  1. the host is normalized (driver.NormalizeHost); garbage is refused;
//  2. deny rules are checked first, then allow rules; no allow rule means
//     no connection;
//  3. the proxy resolves the name itself (Resolver) and checks every
//     address: deny rules naming it, then special addresses (loopback,
//     private, link-local, cloud metadata, CGNAT, multicast, ...), which
//     only an allow rule naming that very address lets through;
//  4. it dials exactly the address it checked, never the name again, so
//     DNS rebinding (a name that answers 127.0.0.1 on the second lookup)
//     gains nothing.
//
// A blocked HTTP request gets 403 with an X-Sage-Blocked header that
// names the rule or the reason; a blocked SOCKS5 request gets reply 0x02
// (not allowed by ruleset). Every decision, allowed or not, is reported
// to the Observer as an Event.
package egress
