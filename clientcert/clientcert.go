// Package clientcert authenticates an agent by its TLS client
// certificate, so a workload (a pod given a SPIFFE SVID by its mesh, a
// service given a certificate by the organization's CA) calls tools with
// no bearer secret to leak.
//
// A certificate authenticates when it verifies against the configured
// client CA (for client authentication, at the time of the request), its
// serial is not on the revocation list, and it maps to an agent identity
// by this rule:
//
//   - a SPIFFE ID (a URI SAN spiffe://…) must read
//     spiffe://<trust-domain>/org/<organization>/agent/<identity>, the
//     trust domain the configured one when one is configured;
//   - a certificate with no SPIFFE ID maps by its subject: the first
//     Organization (O) is the organization, the Common Name (CN) the
//     agent identity.
//
// A certificate that fits neither is refused, with the reason: never
// taken as anonymous, never guessed at. What the identity may call is
// its grants', as for any agent.
//
// Revocation is by serial, in a file the operator keeps beside the CA
// bundle (see Revocations): the CA belongs to the operator's PKI, not to
// an organization's data, and every node that is given the CA file is
// given the list with it, checked on each request with no database read.
package clientcert

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
)

// Header is the request header a trusted TLS-terminating proxy forwards
// the client's certificate in: Envoy's X-Forwarded-Client-Cert (its Cert
// field, URL-encoded PEM), or the URL-encoded PEM alone (nginx's
// $ssl_client_escaped_cert).
const Header = "X-Forwarded-Client-Cert"

// CredentialPrefix begins the credential id of a certificate: the prefix
// and the certificate's serial in hex. It is what rate limits, MCP
// sessions and the audit trail name the caller's credential by.
const CredentialPrefix = "x509:"

// ErrNone: the request carries no client certificate (nor a forwarded
// one that counts). The door then answers as for a request with no
// credential at all.
var ErrNone = errors.New("no client certificate")

// RefusedError refuses a client certificate, saying why: expired, not yet
// valid, of another CA, revoked, or mapped to no agent identity. A
// certificate is public, so the reason teaches its holder nothing they
// could not read from it.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "the client certificate is refused: " + e.Reason }

// Unwrap makes a refusal a toolplane.ErrUnauthenticated.
func (e *RefusedError) Unwrap() error { return toolplane.ErrUnauthenticated }

func refused(format string, args ...any) *RefusedError {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Identity is the agent identity a certificate maps to.
type Identity struct {
	Organization, Agent string
	// Serial is the certificate's serial number, lower-case hex.
	Serial string
	// Name is what it was mapped from: the SPIFFE ID, or the subject.
	Name string
}

// Map answers the agent identity cert maps to by the package's rule,
// trustDomain ("" for any) the SPIFFE trust domain it must be in: when
// set, a certificate without a SPIFFE ID maps to nothing.
func Map(cert *x509.Certificate, trustDomain string) (Identity, error) {
	id := Identity{Serial: Serial(cert)}
	var spiffe []*url.URL
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffe = append(spiffe, u)
		}
	}
	switch len(spiffe) {
	case 0:
		id.Name = cert.Subject.String()
		if trustDomain != "" {
			// A trust domain set is a rule every certificate meets: one
			// without a SPIFFE ID is in none, whatever its subject says.
			return id, refused("its subject %q carries no SPIFFE ID in the trust domain %s", id.Name, trustDomain)
		}
		if len(cert.Subject.Organization) == 0 || cert.Subject.CommonName == "" {
			return id, refused("its subject %q maps to no agent identity: a certificate without a SPIFFE ID names its organization in O and its agent identity in CN", id.Name)
		}
		id.Organization, id.Agent = cert.Subject.Organization[0], cert.Subject.CommonName
	case 1:
		u := spiffe[0]
		id.Name = u.String()
		parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
		if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(parts) != 4 || parts[0] != "org" || parts[2] != "agent" {
			return id, refused("its SPIFFE ID %s maps to no agent identity: the rule is spiffe://<trust-domain>/org/<organization>/agent/<identity>", id.Name)
		}
		if trustDomain != "" && !strings.EqualFold(u.Host, trustDomain) {
			return id, refused("its SPIFFE ID %s is not in the trust domain %s", id.Name, trustDomain)
		}
		id.Organization, id.Agent = parts[1], parts[3]
	default:
		return id, refused("it carries %d SPIFFE IDs; a certificate names one", len(spiffe))
	}
	for _, v := range []struct{ what, value string }{{"organization", id.Organization}, {"agent identity", id.Agent}} {
		if v.value == "" || strings.ContainsAny(v.value, "%/ \t\r\n") || toolplane.CheckLen(v.what, v.value, toolplane.MaxNameLen) != nil {
			return id, refused("%s maps to the %s %q, which is not a name", id.Name, v.what, v.value)
		}
	}
	return id, nil
}

// Serial answers cert's serial number as the revocation list and the
// credential name it: lower-case hex, no leading zeros.
func Serial(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

// Authority verifies client certificates against a CA bundle and a
// revocation list, and maps them to agents' credentials.
type Authority struct {
	roots *x509.CertPool
	// TrustDomain, when set, is the SPIFFE trust domain every SPIFFE ID
	// must be in.
	TrustDomain string
	// Revoked, when set, is the revocation list.
	Revoked *Revocations

	mu    sync.Mutex
	cache map[[32]byte]verified
}

// verified is a chain that verified, and until when that holds.
type verified struct {
	id    Identity
	until time.Time
}

// cacheSize bounds the verified chains remembered; past it the memory is
// dropped whole (a node sees far fewer distinct workloads).
const cacheSize = 4096

// cacheFor is how long a verification is reused, within the chain's
// validity: verifying a signature chain costs far more than a request.
const cacheFor = 5 * time.Minute

// LoadAuthority reads the PEM CA bundle caFile.
func LoadAuthority(caFile string) (*Authority, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", caFile)
	}
	return &Authority{roots: pool}, nil
}

// NewAuthority answers an authority trusting roots.
func NewAuthority(roots *x509.CertPool) *Authority { return &Authority{roots: roots} }

// Pool answers the CA pool, for a TLS configuration's ClientCAs (the
// names a server sends when it asks for a certificate).
func (a *Authority) Pool() *x509.CertPool { return a.roots }

// Verify answers the identity chain (the leaf first, then any
// intermediates the client sent) authenticates at now, or a
// *RefusedError saying why not.
func (a *Authority) Verify(chain []*x509.Certificate, now time.Time) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, ErrNone
	}
	leaf := chain[0]
	key := sha256.Sum256(leaf.Raw)
	a.mu.Lock()
	v, ok := a.cache[key]
	a.mu.Unlock()
	if !ok || !now.Before(v.until) {
		var err error
		if v, err = a.verify(chain, now); err != nil {
			return v.id, err
		}
		a.mu.Lock()
		if a.cache == nil || len(a.cache) >= cacheSize {
			a.cache = make(map[[32]byte]verified)
		}
		a.cache[key] = v
		a.mu.Unlock()
	}
	// Read at every request: a revocation is in force at once.
	if a.Revoked.Has(v.id.Serial) {
		return v.id, refused("its serial %s is revoked", v.id.Serial)
	}
	return v.id, nil
}

// verify checks chain at now and maps its leaf, with no cache.
func (a *Authority) verify(chain []*x509.Certificate, now time.Time) (verified, error) {
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return verified{id: Identity{Serial: Serial(leaf), Name: leaf.Subject.String()}}, verifyRefusal(leaf, now, err)
	}
	id, err := Map(leaf, a.TrustDomain)
	if err != nil {
		return verified{id: id}, err
	}
	until := now.Add(cacheFor)
	for _, c := range chains[0] {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	return verified{id: id, until: until}, nil
}

// verifyRefusal words why a chain did not verify.
func verifyRefusal(leaf *x509.Certificate, now time.Time, err error) *RefusedError {
	var (
		invalid x509.CertificateInvalidError
		unknown x509.UnknownAuthorityError
	)
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired && now.After(leaf.NotAfter):
		return refused("it expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired && now.Before(leaf.NotBefore):
		return refused("it is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return refused("a certificate of its chain is outside its validity")
	case errors.As(err, &unknown):
		return refused("it is not issued by the configured client CA")
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return refused("it is not for client authentication (extended key usage)")
	}
	return refused("it does not verify: %v", err)
}

// Credential answers the agent credential of id, valid until notAfter.
func Credential(id Identity, notAfter time.Time) *toolplane.Credential {
	return &toolplane.Credential{ID: CredentialPrefix + id.Serial, OrganizationID: id.Organization, Kind: toolplane.CredentialAgent,
		Subject: id.Agent, Label: id.Name, ExpiresAt: notAfter}
}

// Authenticate answers the agent credential of r's client certificate at
// now: the one its TLS connection presented, or, when forwarded is set
// (the connection's peer is a trusted TLS-terminating proxy), the one in
// its Header. ErrNone when there is none; a *RefusedError when there is
// one that does not authenticate.
func (a *Authority) Authenticate(r *http.Request, forwarded bool, now time.Time) (*toolplane.Credential, error) {
	chain, err := Chain(r, forwarded)
	if err != nil {
		return nil, err
	}
	id, err := a.Verify(chain, now)
	if err != nil {
		return nil, err
	}
	return Credential(id, chain[0].NotAfter), nil
}

// Chain answers r's client certificate chain: its Header's when
// forwarded is set and the header is there (the proxy's, not the proxy's
// own certificate, is the client's), else its TLS connection's.
func Chain(r *http.Request, forwarded bool) ([]*x509.Certificate, error) {
	if forwarded {
		if v := r.Header.Values(Header); len(v) > 0 {
			return Forwarded(v[len(v)-1])
		}
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return r.TLS.PeerCertificates, nil
	}
	return nil, ErrNone
}

// Forwarded parses a Header value: Envoy's form (elements separated by
// commas, each of key=value pairs separated by semicolons, of which the
// last element's Cert, or else Chain, is read: the element the proxy
// next to toolplane added), or a URL-encoded PEM certificate (chain). An
// element with no certificate (Envoy configured to forward the hash and
// names alone) is refused: the certificate itself is verified here, so
// that its expiry and revocation are toolplane's to check.
func Forwarded(value string) ([]*x509.Certificate, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, ErrNone
	}
	pemText := value
	if !strings.HasPrefix(value, "-----") && !strings.HasPrefix(value, "%2D") && !strings.HasPrefix(value, "%2d") {
		elems := splitQuoted(value, ',')
		var cert, chain string
		for _, kv := range splitQuoted(elems[len(elems)-1], ';') {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "cert":
				cert = strings.Trim(strings.TrimSpace(v), `"`)
			case "chain":
				chain = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		if pemText = chain; pemText == "" {
			pemText = cert
		}
		if pemText == "" {
			return nil, refused("the forwarded %s names no certificate (Cert or Chain); configure the proxy to forward it", Header)
		}
	}
	// Percent-decoded as a path is ('+' is base64's, not a space); an
	// encoder that wrote the armor's space as '+' (form encoding) is read
	// too.
	text, err := url.PathUnescape(pemText)
	if err != nil {
		return nil, refused("the forwarded certificate is not URL-encoded PEM")
	}
	text = armor.Replace(text)
	var chainOut []*x509.Certificate
	for rest := []byte(text); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, refused("the forwarded certificate does not parse: %v", err)
		}
		chainOut = append(chainOut, c)
	}
	if len(chainOut) == 0 {
		return nil, refused("the forwarded %s holds no PEM certificate", Header)
	}
	return chainOut, nil
}

// armor puts back the space of PEM armor lines form-encoded as '+'.
var armor = strings.NewReplacer("-----BEGIN+CERTIFICATE-----", "-----BEGIN CERTIFICATE-----", "-----END+CERTIFICATE-----", "-----END CERTIFICATE-----")

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var (
		out    []string
		quoted bool
		start  int
	)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// logger answers log, or slog.Default() when nil.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}

// NoCertificate reports whether err says a request carried no client
// certificate (ErrNone), for door.CertificateAuthenticator.
func (a *Authority) NoCertificate(err error) bool { return errors.Is(err, ErrNone) }
