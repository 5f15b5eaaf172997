package mcpserver

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/toolplane/toolplane/httperr"
)

// ProtectHost guards an MCP endpoint against DNS rebinding and cross-site
// requests, before any credential is looked at. It answers 403 Forbidden
// to a request
//
//   - that arrived on a loopback address of this server (127.0.0.0/8, ::1)
//     with a Host header that is neither a loopback name (localhost,
//     127.0.0.0/8, ::1) nor one of allowed. A page on evil.example whose
//     name was rebound to 127.0.0.1 reaches the server with
//     "Host: evil.example". A request that arrived on another address is
//     not judged by its Host: a server listening on every interface does
//     not know all the names it is reached by.
//   - with an Origin header (browsers send one on cross-site requests and on
//     every POST) that is "null", unparsable, not http(s), or names a host
//     that is neither a loopback name, one of allowed, nor the request's own
//     Host. The MCP transport requires a server to refuse an invalid Origin
//     with 403.
//
// A request without an Origin header (any non-browser MCP client) is judged
// by its Host alone. allowed holds host names without port, compared
// case-insensitively: the names a reverse proxy on this machine forwards
// with ("toolplane.example.com"), and sites whose pages may call. An
// address can be listed the same way ("10.0.0.5", "fd00::1" or "[fd00::1]").
//
// The SDK's StreamableHTTPHandler makes the same Host check, without
// allowed names, unless StreamableHTTPOptions.DisableLocalhostProtection is
// set; it runs behind the bearer-token check and does not look at Origin.
// ProtectHost goes in front of both; with allowed names, the SDK's check
// must be disabled or it refuses those names again.
func ProtectHost(next http.Handler, allowed ...string) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		if a = normalizeHost(a); a != "" {
			names[a] = true
		}
	}
	ok := func(host string) bool {
		h := hostOf(host)
		return loopbackHeaderHost(h) || names[h]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrivedOnLoopback(r) && !ok(r.Host) {
			fail(w, httperr.Denied, "Forbidden: this server does not answer to host "+quoteHost(r.Host))
			return
		}
		for _, o := range r.Header.Values("Origin") {
			if !validOrigin(o, r.Host, ok) {
				fail(w, httperr.Denied, "Forbidden: requests from origin "+quoteHost(o)+" are not accepted")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// validOrigin reports whether an Origin header value names a site allowed
// to call: a loopback or allowed host, or the server's own Host.
func validOrigin(origin, host string, ok func(string) bool) bool {
	origin = strings.TrimSpace(origin)
	if origin == "" || origin == "null" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return ok(u.Host) || strings.EqualFold(u.Host, host) ||
		// An Origin carries no default port; the Host may.
		strings.EqualFold(u.Host+":"+defaultPort(u.Scheme), host)
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// arrivedOnLoopback reports whether the request came in on a loopback
// address of this server.
func arrivedOnLoopback(r *http.Request) bool {
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// hostOf is host without its port and brackets, lower-cased.
func hostOf(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return normalizeHost(host)
}

func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.TrimPrefix(h, "[")
	h = strings.TrimSuffix(h, "]")
	return strings.TrimSuffix(h, ".")
}

// loopbackHeaderHost reports whether h, the host of a Host or Origin
// header as normalizeHost left it, names this machine: localhost or a
// loopback IP literal. Unlike egress.LoopbackHost it takes a zoned IPv6
// literal (::1%lo0) as loopback, so it stays its own function: one of the
// two would otherwise change its answer.
func loopbackHeaderHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// quoteHost quotes a header value for an error message, cut short.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return "\"" + strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return -1
		}
		return r
	}, s), "") + "\""
}
