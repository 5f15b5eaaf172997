package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/internal/certtest"
	"github.com/toolplane/toolplane/tlscert"
	"github.com/toolplane/toolplane/upstream"
)

// tlsNode is a server started for the TLS tests, with the files it was
// started from.
type tlsNode struct {
	base, agent string
	dir         string
	ca          *certtest.CA
}

// startTLS starts a demo server with cfg, its certificate pair and client
// CA files written in a directory of their own, and answers it once it
// serves.
func startTLS(t *testing.T, cfg Config) *tlsNode {
	t.Helper()
	dir := t.TempDir()
	cfg.Addr, cfg.Database, cfg.Demo = "127.0.0.1:0", filepath.Join(dir, "toolplane.db"), true
	cfg.Upstreams = []upstream.Config{{Slug: "slow", URL: newSlowUpstream(t).url}}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })
	n := &tlsNode{base: s.scheme() + "://" + s.Addr(), dir: dir}
	n.agent = readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
	return n
}

// client answers an HTTPS client trusting ca that presents cert (none
// when nil), on a connection of its own.
func client(ca *certtest.CA, cert *certtest.Issued) *http.Client {
	c := &tls.Config{RootCAs: ca.Pool()}
	if cert != nil {
		// Sent whatever CAs the server names, as curl --cert does (Go's
		// own choice would withhold one of another CA).
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: c, ForceAttemptHTTP2: true}}
}

// ask sends a request and answers its status, WWW-Authenticate and body.
func ask(t *testing.T, c *http.Client, method, u, bearer, body string, header map[string]string) (int, string, string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), string(raw), res
}

// An agent authenticates with its client certificate alone, on both
// doors, over HTTP/2; every bad certificate is refused with its reason
// and the doors' 401 challenge; a bearer token, when sent, decides; a
// forwarded certificate from a peer that is not a trusted proxy is
// ignored.
func TestClientCertificatesAuthenticateAgentsOnBothDoors(t *testing.T) {
	t.Parallel()
	ca, other := certtest.NewCA(t, "agents CA"), certtest.NewCA(t, "another CA")
	files := t.TempDir()
	serverCert := ca.Issue(t, certtest.Leaf{Server: true})
	now := time.Now()
	good := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent"})
	bySubject := ca.Issue(t, certtest.Leaf{Organization: "default", CommonName: "demo-agent"})
	revoked := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent"})
	cfg := Config{
		TLSCert: certtest.Write(t, files, "tls.crt", serverCert.CertPEM), TLSKey: certtest.Write(t, files, "tls.key", serverCert.KeyPEM),
		ClientCA: certtest.Write(t, files, "ca.pem", ca.PEM), SPIFFETrustDomain: "example.org",
		ClientCertRevoked: certtest.Write(t, files, "revoked.txt", []byte(clientcert.Serial(revoked.Cert)+"\n")),
	}
	n := startTLS(t, cfg)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	meta := n.base + "/.well-known/oauth-protected-resource"
	cases := []struct {
		name   string
		cert   *certtest.Issued
		bearer string
		header map[string]string
		status int
		say    string
	}{
		{"a SPIFFE ID", good, "", nil, 200, ""},
		{"a subject, under a trust domain", bySubject, "", nil, 401, "no SPIFFE ID in the trust domain"},
		{"expired", ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent", NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}), "", nil, 401, "it expired at"},
		{"revoked", revoked, "", nil, 401, "is revoked"},
		{"another CA", other.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent"}), "", nil, 401, "not issued by the configured client CA"},
		{"a SPIFFE ID that maps to nothing", ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/ns/prod/sa/demo"}), "", nil, 401, "maps to no agent identity"},
		{"another trust domain", ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://evil.example/org/default/agent/demo-agent"}), "", nil, 401, "not in the trust domain"},
		{"no certificate, no token", nil, "", nil, 401, "send an"},
		{"a good certificate and a wrong token: the token decides", good, "tpk_nothing_AAAA", nil, 401, "not valid"},
		{"a refused certificate and the agent's key: the key decides", other.Issue(t, certtest.Leaf{Organization: "default", CommonName: "x"}), n.agent, nil, 200, ""},
		{"a forwarded certificate from a peer that is no proxy", nil, "", map[string]string{clientcert.Header: url.PathEscape(string(good.CertPEM))}, 401, "send an"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := client(ca, tt.cert)
			for _, d := range []struct{ door, method, path, body, meta string }{
				{"REST", "GET", "/v1/tools", "", meta},
				{"MCP", "POST", "/mcp", initialize, meta + "/mcp"},
				{"a governed copy", "POST", "/mcp/slow", initialize, meta + "/mcp/slow"},
			} {
				status, challenge, body, res := ask(t, c, d.method, n.base+d.path, tt.bearer, d.body, tt.header)
				if res.ProtoMajor != 2 {
					t.Errorf("%s: %s, want HTTP/2", d.door, res.Proto)
				}
				if status != tt.status || !strings.Contains(body, tt.say) {
					t.Errorf("%s: %d %s, want %d saying %q", d.door, status, body, tt.status, tt.say)
					continue
				}
				if status == 401 && !strings.HasPrefix(challenge, `Bearer realm="toolplane", resource_metadata="`+d.meta+`"`) {
					t.Errorf("%s: WWW-Authenticate %q, want it to name %s", d.door, challenge, d.meta)
				}
				if status == 200 && d.door == "REST" && !strings.Contains(body, "demo.search_tickets") {
					t.Errorf("%s: the agent is not shown its tools: %s", d.door, body)
				}
			}
		})
	}

	// The go-sdk client, with the certificate alone: lists and calls.
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: n.base + "/mcp", HTTPClient: client(ca, good)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list with a certificate: %v %v", tools, err)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "refund"}})
	if err != nil || r.IsError {
		t.Fatalf("tools/call with a certificate: %+v %v", r, err)
	}
}

// Behind a TLS-terminating proxy on the client-certificate proxies' list,
// the certificate it forwards (X-Forwarded-Client-Cert) authenticates,
// and is verified and checked for revocation as a direct one; the same
// header from a peer that is not on that list is ignored, even when it is
// trusted for X-Forwarded-For.
func TestAForwardedClientCertificateCountsOnlyFromATrustedProxy(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "agents CA")
	files := t.TempDir()
	good := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent"})
	revoked := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/demo-agent"})
	caFile := certtest.Write(t, files, "ca.pem", ca.PEM)
	revokedFile := certtest.Write(t, files, "revoked.txt", []byte(clientcert.Serial(revoked.Cert)+"\n"))
	trusted := startTLS(t, Config{ClientCA: caFile, ClientCertRevoked: revokedFile, ClientCertProxies: []string{"127.0.0.1", "::1"}})
	untrusted := startTLS(t, Config{ClientCA: caFile, ClientCertProxies: []string{"10.0.0.0/8"}, TrustedProxies: []string{"127.0.0.1", "::1"}})
	envoy := func(c *certtest.Issued) map[string]string {
		return map[string]string{clientcert.Header: `By=spiffe://example.org/proxy;Hash=x;Cert="` + url.PathEscape(string(c.CertPEM)) + `";URI=` + c.Cert.URIs[0].String()}
	}
	for _, tt := range []struct {
		name   string
		base   string
		header map[string]string
		status int
		say    string
	}{
		{"from a trusted proxy", trusted.base, envoy(good), 200, "demo.search_tickets"},
		{"revoked, from a trusted proxy", trusted.base, envoy(revoked), 401, "is revoked"},
		{"a header naming no certificate", trusted.base, map[string]string{clientcert.Header: "Hash=x;URI=spiffe://example.org/org/default/agent/demo-agent"}, 401, "names no certificate"},
		{"from a peer that is no trusted proxy", untrusted.base, envoy(good), 401, "send an API key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, _, body, _ := ask(t, http.DefaultClient, "GET", tt.base+"/v1/tools", "", "", tt.header)
			if status != tt.status || !strings.Contains(body, tt.say) {
				t.Errorf("%d %s, want %d saying %q", status, body, tt.status, tt.say)
			}
		})
	}
}

// The served certificate is replaced on disk and served from the next
// connection on, with no restart; a bad replacement keeps it.
func TestServedCertificateIsReloaded(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "server CA")
	files := t.TempDir()
	first, second := ca.Issue(t, certtest.Leaf{Server: true, Serial: 0x51}), ca.Issue(t, certtest.Leaf{Server: true, Serial: 0x52})
	certFile, keyFile := certtest.Write(t, files, "tls.crt", first.CertPEM), certtest.Write(t, files, "tls.key", first.KeyPEM)
	n := startTLS(t, Config{TLSCert: certFile, TLSKey: keyFile})
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(n.base, "https://"), &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
	}
	if got := serial(); got != "51" {
		t.Fatalf("serial %s, want 51", got)
	}
	write := func(file string, data []byte, at time.Time) {
		t.Helper()
		if err := os.WriteFile(file+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file+".tmp", at, at); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
	// A key that is not the certificate's: the old pair is served.
	write(keyFile, second.KeyPEM, time.Now().Add(time.Minute))
	time.Sleep(tlscert.DefaultInterval + 100*time.Millisecond)
	if got := serial(); got != "51" {
		t.Fatalf("with a mismatched pair on disk: serial %s, want the old 51", got)
	}
	write(certFile, second.CertPEM, time.Now().Add(2*time.Minute))
	deadline := time.Now().Add(10 * time.Second)
	for serial() != "52" {
		if time.Now().After(deadline) {
			t.Fatal("the replaced certificate is never served")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A pair that cannot be served fails the start, naming the flag's field
// and the file; so does half a pair, and a revocation list without a CA.
func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "server CA")
	a, b := ca.Issue(t, certtest.Leaf{Server: true}), ca.Issue(t, certtest.Leaf{Server: true})
	files := t.TempDir()
	certFile, otherKey := certtest.Write(t, files, "a.crt", a.CertPEM), certtest.Write(t, files, "b.key", b.KeyPEM)
	for _, tt := range []struct {
		name  string
		cfg   Config
		field string
		is    error
	}{
		{"a key that is not the certificate's", Config{TLSCert: certFile, TLSKey: otherKey}, "TLSCert", tlscert.ErrMismatch},
		{"a missing key file", Config{TLSCert: certFile, TLSKey: filepath.Join(files, "none.key")}, "TLSCert", os.ErrNotExist},
		{"a certificate without a key", Config{TLSCert: certFile}, "TLSCert", nil},
		{"a revocation list without a CA", Config{ClientCertRevoked: certFile}, "ClientCertRevoked", nil},
		{"a client CA file that is not PEM", Config{ClientCA: otherKey, TrustedProxies: []string{"10.0.0.1"}}, "ClientCA", nil},
		{"a client CA and no way for a certificate to arrive", Config{ClientCA: certFile}, "ClientCA", ErrNoCertificatePath},
		{"an external issuer not configured", Config{OAuthExternalIssuer: true}, "OAuthExternalIssuer", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.cfg.Addr, tt.cfg.Database = "127.0.0.1:0", filepath.Join(dir, "toolplane.db")
			s, err := New(context.Background(), tt.cfg)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("New: %v, want a ConfigError of %s wrapping %v", err, tt.field, tt.is)
			}
		})
	}
}

// The protected resource metadata names toolplane's own authorization
// server (the public URL) by default, for the server, /mcp and each
// governed copy.
func TestProtectedResourceMetadataNamesTheOwnIssuer(t *testing.T) {
	t.Parallel()
	n := startTLS(t, Config{})
	for _, path := range []string{"", "/mcp", "/mcp/slow"} {
		status, _, body, _ := ask(t, http.DefaultClient, "GET", n.base+"/.well-known/oauth-protected-resource"+path, "", "", nil)
		var doc struct {
			Resource string   `json:"resource"`
			Servers  []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil || status != 200 || doc.Resource != n.base+path ||
			len(doc.Servers) != 1 || doc.Servers[0] != n.base || len(doc.Scopes) != 1 || doc.Scopes[0] != "tools" {
			t.Errorf("%q: %d %s", path, status, body)
		}
	}
}
