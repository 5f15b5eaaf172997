package clientcert_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/internal/certtest"
)

// The mapping rule, case by case: a SPIFFE ID of the documented form, a
// subject with O and CN; everything else maps to nothing, with the reason.
func TestMap(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "agents CA")
	tests := []struct {
		name        string
		leaf        certtest.Leaf
		trustDomain string
		org, agent  string
		refused     string // in the reason; "" when it maps
	}{
		{"SPIFFE ID", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/billing-bot"}, "", "acme", "billing-bot", ""},
		{"SPIFFE ID in the trust domain", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/bot"}, "example.org", "acme", "bot", ""},
		{"SPIFFE ID wins over the subject", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/bot", Organization: "other", CommonName: "x"}, "", "acme", "bot", ""},
		{"subject", certtest.Leaf{Organization: "default", CommonName: "support-agent"}, "", "default", "support-agent", ""},
		{"SPIFFE ID of a workload, not an agent", certtest.Leaf{SPIFFE: "spiffe://example.org/ns/prod/sa/billing"}, "", "", "", "maps to no agent identity"},
		{"SPIFFE ID too deep", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/bot/extra"}, "", "", "", "maps to no agent identity"},
		{"SPIFFE ID with an empty agent", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/"}, "", "", "", "not a name"},
		{"SPIFFE ID of another trust domain", certtest.Leaf{SPIFFE: "spiffe://evil.example/org/acme/agent/bot"}, "example.org", "", "", "not in the trust domain example.org"},
		{"SPIFFE ID with an escaped slash", certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/a%2Fb"}, "", "", "", "not a name"},
		{"subject under a trust domain", certtest.Leaf{Organization: "acme", CommonName: "bot"}, "example.org", "", "", "no SPIFFE ID in the trust domain example.org"},
		{"subject without O", certtest.Leaf{CommonName: "bot"}, "", "", "", "names its organization in O"},
		{"subject without CN", certtest.Leaf{Organization: "acme"}, "", "", "", "names its organization in O"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			leaf := ca.Issue(t, tt.leaf).Cert
			id, err := clientcert.Map(leaf, tt.trustDomain)
			if tt.refused != "" {
				var re *clientcert.RefusedError
				if !errors.As(err, &re) || !errors.Is(err, toolplane.ErrUnauthenticated) || !strings.Contains(re.Reason, tt.refused) {
					t.Fatalf("Map: %v, want a refusal saying %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Organization != tt.org || id.Agent != tt.agent || id.Serial != clientcert.Serial(leaf) {
				t.Errorf("Map: %+v, want %s/%s", id, tt.org, tt.agent)
			}
		})
	}
}

// Verify refuses each bad certificate with its reason: expired, not yet
// valid, of another CA, for servers only, revoked, mapped to nothing;
// and a revocation written to the list is in force at the next request,
// even for a chain verified (and remembered) before.
func TestVerifyRefusesBadCertificates(t *testing.T) {
	t.Parallel()
	ca, other := certtest.NewCA(t, "agents CA"), certtest.NewCA(t, "another CA")
	now := time.Now()
	dir := t.TempDir()
	revokedFile := certtest.Write(t, dir, "revoked.txt", []byte("# revoked serials\n0a:bc:de\n"))
	revs, err := clientcert.LoadRevocations(revokedFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	revs.Interval = time.Nanosecond
	a := clientcert.NewAuthority(ca.Pool())
	a.Revoked = revs
	spiffe := "spiffe://example.org/org/acme/agent/bot"
	tests := []struct {
		name    string
		cert    *certtest.Issued
		refused string
	}{
		{"good", ca.Issue(t, certtest.Leaf{SPIFFE: spiffe}), ""},
		{"expired", ca.Issue(t, certtest.Leaf{SPIFFE: spiffe, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}), "it expired at"},
		{"not yet valid", ca.Issue(t, certtest.Leaf{SPIFFE: spiffe, NotBefore: now.Add(time.Hour)}), "not valid before"},
		{"another CA", other.Issue(t, certtest.Leaf{SPIFFE: spiffe}), "not issued by the configured client CA"},
		{"a server's certificate", ca.Issue(t, certtest.Leaf{SPIFFE: spiffe, Server: true}), "not for client authentication"},
		{"revoked", ca.Issue(t, certtest.Leaf{SPIFFE: spiffe, Serial: 0xabcde}), "serial abcde is revoked"},
		{"maps to nothing", ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/ns/prod/sa/bot"}), "maps to no agent identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Verify([]*x509.Certificate{tt.cert.Cert}, now)
			if tt.refused == "" {
				if err != nil || id.Organization != "acme" || id.Agent != "bot" {
					t.Fatalf("Verify: %+v, %v", id, err)
				}
				return
			}
			var re *clientcert.RefusedError
			if !errors.As(err, &re) || !strings.Contains(re.Reason, tt.refused) {
				t.Fatalf("Verify: %v, want a refusal saying %q", err, tt.refused)
			}
		})
	}
	// Revoked after it verified: refused at once, and let in again when
	// the line goes.
	good := tests[0].cert
	line := clientcert.Serial(good.Cert)
	if err := os.WriteFile(revokedFile, []byte("0a:bc:de\n"+strings.ToUpper(line)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, revokedFile)
	if _, err := a.Verify([]*x509.Certificate{good.Cert}, now); err == nil || !strings.Contains(err.Error(), "is revoked") {
		t.Fatalf("a certificate revoked after it verified: %v, want refused", err)
	}
	// A list that no longer parses keeps the one last read.
	if err := os.WriteFile(revokedFile, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, revokedFile)
	if _, err := a.Verify([]*x509.Certificate{good.Cert}, now); err == nil {
		t.Fatal("a broken revocation list let a revoked certificate in")
	}
	if err := os.WriteFile(revokedFile, []byte("# none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, revokedFile)
	if _, err := a.Verify([]*x509.Certificate{good.Cert}, now); err != nil {
		t.Fatalf("unrevoked: %v", err)
	}
	if _, err := a.Verify(nil, now); !errors.Is(err, clientcert.ErrNone) {
		t.Errorf("no chain: %v, want ErrNone", err)
	}
}

// bump moves file's modification time on, as a later write would.
func bump(t *testing.T, file string) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	later := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
}

// Forwarded reads Envoy's header (the last element's Cert or Chain) and a
// URL-encoded PEM; a header that names no certificate is refused.
func TestForwarded(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "agents CA")
	leaf := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/bot"})
	esc := url.PathEscape(string(leaf.CertPEM))
	other := url.QueryEscape(string(ca.Issue(t, certtest.Leaf{Organization: "x", CommonName: "y"}).CertPEM))
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"envoy", `By=spiffe://example.org/toolplane;Hash=abc;Cert="` + esc + `";Subject="";URI=spiffe://example.org/org/acme/agent/bot`, true},
		{"envoy, the last element counts", `Hash=1;Cert="` + other + `",Hash=2;Cert="` + esc + `"`, true},
		{"envoy chain", `Hash=abc;Chain="` + esc + `"`, true},
		{"escaped PEM", esc, true},
		{"plain PEM", string(leaf.CertPEM), true},
		{"envoy without a certificate", `By=spiffe://x;Hash=abc;URI=spiffe://example.org/org/acme/agent/bot`, false},
		{"not PEM", url.QueryEscape("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), false},
		{"bad escape", `Cert="%zz"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			chain, err := clientcert.Forwarded(tt.value)
			if !tt.ok {
				if !errors.Is(err, toolplane.ErrUnauthenticated) {
					t.Fatalf("Forwarded: %v, want a refusal", err)
				}
				return
			}
			if err != nil || len(chain) == 0 || clientcert.Serial(chain[0]) != clientcert.Serial(leaf.Cert) {
				t.Fatalf("Forwarded: %v, %v", chain, err)
			}
		})
	}
}

// Authenticate reads the connection's certificate, and a forwarded one
// only when told the peer is trusted (the door decides that); the
// credential is the agent's, named by the serial.
func TestAuthenticateReadsTheForwardedHeaderOnlyWhenTrusted(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "agents CA")
	direct := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/direct"})
	fwd := ca.Issue(t, certtest.Leaf{SPIFFE: "spiffe://example.org/org/acme/agent/forwarded"})
	a := clientcert.NewAuthority(ca.Pool())
	r := httptest.NewRequest(http.MethodGet, "/v1/tools", nil)
	r.Header.Set(clientcert.Header, url.QueryEscape(string(fwd.CertPEM)))
	if _, err := a.Authenticate(r, false, time.Now()); !a.NoCertificate(err) {
		t.Errorf("an untrusted peer's header and no TLS: %v, want no certificate", err)
	}
	cred, err := a.Authenticate(r, true, time.Now())
	if err != nil || cred.Subject != "forwarded" || cred.OrganizationID != "acme" || cred.Kind != toolplane.CredentialAgent ||
		cred.ID != clientcert.CredentialPrefix+clientcert.Serial(fwd.Cert) || cred.ClientID != "" {
		t.Fatalf("a trusted peer's header: %+v, %v", cred, err)
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{direct.Cert}}
	if cred, err := a.Authenticate(r, false, time.Now()); err != nil || cred.Subject != "direct" {
		t.Fatalf("the connection's certificate, header not trusted: %+v, %v", cred, err)
	}
}

func TestParseSerial(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"0A:BC:DE": "abcde", "0x1f": "1f", "00 01": "1", "abcdef0123456789abcdef": "abcdef0123456789abcdef"} {
		if got, err := clientcert.ParseSerial(in); err != nil || got != want {
			t.Errorf("ParseSerial(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "xyz", "-1", "0x"} {
		if _, err := clientcert.ParseSerial(in); err == nil {
			t.Errorf("ParseSerial(%q) accepted", in)
		}
	}
}

func FuzzForwarded(f *testing.F) {
	f.Add(`By=spiffe://x;Hash=abc;Cert="%2D%2D%2D%2D%2DBEGIN";URI=spiffe://x`)
	f.Add(`Cert="a\"b",Chain=c`)
	f.Add("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	f.Fuzz(func(t *testing.T, v string) {
		chain, err := clientcert.Forwarded(v)
		if err == nil && len(chain) == 0 {
			t.Fatal("no error and no certificate")
		}
		if err != nil && !errors.Is(err, toolplane.ErrUnauthenticated) && !errors.Is(err, clientcert.ErrNone) {
			t.Fatalf("an error that is neither a refusal nor none: %v", err)
		}
	})
}

func FuzzParseSerial(f *testing.F) {
	f.Add("0A:BC")
	f.Add("0x00ff")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := clientcert.ParseSerial(s)
		if err != nil {
			return
		}
		again, err := clientcert.ParseSerial(got)
		if err != nil || again != got {
			t.Fatalf("ParseSerial(%q) = %q, which reads back as %q, %v", s, got, again, err)
		}
	})
}
