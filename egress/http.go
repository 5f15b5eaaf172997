package egress

import (
	"net/http"
	"strconv"
	"time"
)

// maxIdlePerHost is how many idle connections to one host the transport
// keeps.
const maxIdlePerHost = 64

// newTransport answers the Policy's HTTP transport: every connection
// dialed through DialContext, and no proxy, so neither HTTP_PROXY in the
// environment nor a proxy's own name resolution decides where a request
// goes.
func (p *Policy) newTransport() *http.Transport {
	return &http.Transport{
		Proxy:             nil,
		DialContext:       p.DialContext,
		ForceAttemptHTTP2: true,
		// A connection's calls to its API go to one host, as many at
		// once as the node serves; with fewer idle connections kept than
		// that, every call past them dials and closes a connection of its
		// own, and the host is left with sockets in TIME_WAIT.
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Transport answers the Policy's HTTP transport. It is the Policy's own:
// its idle connections were dialed under this Policy and serve no other.
// Set its TLSClientConfig, if needed, before its first request.
func (p *Policy) Transport() *http.Transport { return p.transport }

// CloseIdleConnections closes the idle connections of the Policy's
// transport, for when the Policy is replaced (its connection's rules
// changed) and its pool should not outlive it.
func (p *Policy) CloseIdleConnections() { p.transport.CloseIdleConnections() }

// Client answers an HTTP client over the Policy's transport with the
// given overall timeout (zero for none) whose redirects are checked
// again: http or https only, the target host on the host list, at most
// five of them, and the secret headers dropped once a redirect leaves the
// original host. The target's addresses are checked when it is dialed, as
// for any request.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     p.transport,
		Timeout:       timeout,
		CheckRedirect: p.checkRedirect,
	}
}

// checkRedirect is the client's CheckRedirect: req is the redirect about
// to be sent, via the requests already sent, oldest first.
func (p *Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	host := req.URL.Hostname()
	if host == "" {
		// A file: or other URL without a host is named whole, so the
		// refusal says where the redirect pointed.
		host = req.URL.Redacted()
	}
	if len(via) > maxRedirects {
		return &RefusedError{Host: host, Rule: "more than " + strconv.Itoa(maxRedirects) + " redirects"}
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return &RefusedError{Host: host, Rule: "redirect to scheme " + quote(s) + ", not http or https"}
	}
	if err := p.checkHost(host); err != nil {
		return err
	}
	// net/http drops Authorization and Cookie on a redirect to a host that
	// is not the original one or a subdomain of it. A subdomain may be
	// another party's, and an API key header is no less a secret, so every
	// secret header is dropped once any hop has left the original host and
	// port, and stays dropped when a later hop returns.
	origin := via[0].URL.Host
	left := req.URL.Host != origin
	for _, r := range via[1:] {
		left = left || r.URL.Host != origin
	}
	if left {
		for _, h := range p.secretHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}
