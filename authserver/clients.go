package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ratelimit"
)

// Limits of what a client says of itself.
const (
	maxRedirectURIs = 10
	maxURILen       = 2000
	maxNameLen      = 200
	maxRequestBytes = 16 << 10
)

// ErrClient: the client is unknown, its document could not be read or is
// not acceptable, or its organization revoked it.
var ErrClient = errors.New("client not acceptable")

// IsDocumentID reports whether a client_id names a client metadata
// document: an https URL with a path.
func IsDocumentID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == "" && u.User == nil
}

// checkRedirects refuses redirect URIs a code must never be sent to: not
// https (or http on a loopback address, RFC 8252), with a fragment, and,
// under allowlist, not on the operator's list.
func (s *Server) checkRedirects(uris []string) error {
	if len(uris) == 0 || len(uris) > maxRedirectURIs {
		return fmt.Errorf("between 1 and %d redirect_uris are required", maxRedirectURIs)
	}
	for _, raw := range uris {
		u, err := url.Parse(raw)
		if err != nil || len(raw) > maxURILen || u.Fragment != "" || u.Host == "" || u.User != nil {
			return errors.New("a redirect_uri is not an absolute URL without a fragment")
		}
		switch u.Scheme {
		case "https":
		case "http":
			if h := u.Hostname(); h != "localhost" && !isLoopback(h) {
				return errors.New("a redirect_uri over http must be on a loopback address")
			}
		default:
			return errors.New("a redirect_uri must be https, or http on a loopback address")
		}
		if s.cfg.Registration == RegistrationAllowlist && !s.allowed(raw) {
			return fmt.Errorf("the redirect_uri %q is not on this server's allow-list (serve --oauth-redirect-allow)", raw)
		}
	}
	return nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allowed reports whether uri is on the operator's allow-list.
func (s *Server) allowed(uri string) bool {
	for _, a := range s.cfg.RedirectAllow {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(uri, p) || a == uri {
			return true
		}
	}
	return false
}

// registration is the part of an RFC 7591 request (and of a client
// metadata document) the server reads.
type registration struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
}

// check refuses metadata the server cannot serve: a client that wants a
// secret, or grants other than the code grant and refresh.
func (r *registration) check() error {
	if m := r.TokenEndpointAuthMethod; m != "" && m != "none" {
		return errors.New("only public clients (token_endpoint_auth_method none) are registered; PKCE protects the code")
	}
	for _, g := range r.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return errors.New("grant_types may be authorization_code and refresh_token only")
		}
	}
	for _, t := range r.ResponseTypes {
		if t != "code" {
			return errors.New("response_types may be code only")
		}
	}
	if len(r.ClientName) > maxNameLen {
		return errors.New("client_name is too long")
	}
	return nil
}

// register answers POST /oauth/register (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Registration == RegistrationOff {
		oauthError(w, http.StatusForbidden, "access_denied", "this server does not register clients; use a client metadata document URL as client_id")
		return
	}
	ctx := r.Context()
	now := s.cfg.Now()
	d := s.cfg.Limits.Take(ctx, "oauth-register:"+s.cfg.ClientAddr(r), ratelimit.Quota{Limit: s.cfg.RegistrationsPerHour, Window: time.Hour}, now)
	if !d.Allowed {
		w.Header().Set("Retry-After", fmt.Sprint(int(d.Retry.Sub(now).Seconds())+1))
		oauthError(w, http.StatusTooManyRequests, "slow_down", "too many registrations from this address")
		return
	}
	var req registration
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the request must be application/json")
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON client metadata object")
		return
	}
	if err := req.check(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", err.Error())
		return
	}
	if err := s.checkRedirects(req.RedirectURIs); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", err.Error())
		return
	}
	c := &toolplane.OAuthClient{ID: toolplane.NewID("tpc_"), Name: req.ClientName, RedirectURIs: req.RedirectURIs,
		Source: toolplane.OAuthClientRegistered, CreatedAt: s.cfg.Now()}
	err := s.cfg.Store.InsertOAuthClient(ctx, c, s.maxClients())
	if errors.Is(err, toolplane.ErrOAuthClientsFull) {
		// RFC 7591 section 3.2.2 has no code for a full server; the
		// request itself is fine, so the refusal says why and who can
		// help. Registrations nobody consented to are swept after a
		// while, which makes room.
		s.log.WarnContext(ctx, "client not registered: the server holds as many OAuth clients as it may (serve --oauth-max-clients)", "max", s.cfg.MaxClients)
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("this server holds as many OAuth clients as its operator allows (%d); ask the operator to raise serve --oauth-max-clients, or use a client metadata document URL this server knows already as client_id", s.cfg.MaxClients))
		return
	}
	if err != nil {
		s.log.ErrorContext(ctx, "client not registered", "err", err)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the client could not be stored")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": c.ID, "client_id_issued_at": c.CreatedAt.Unix(), "client_name": c.Name, "redirect_uris": c.RedirectURIs,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}, "token_endpoint_auth_method": "none",
	})
}

// client answers the client id names: a registered one, or the one its
// metadata document describes (fetched, checked and remembered by this
// node for a while, not stored: see keepDocument).
func (s *Server) client(ctx context.Context, id string) (*toolplane.OAuthClient, error) {
	if id == "" || len(id) > maxURILen {
		return nil, fmt.Errorf("%w: client_id is missing", ErrClient)
	}
	if !IsDocumentID(id) {
		c, err := s.cfg.Store.GetOAuthClient(ctx, id)
		if errors.Is(err, toolplane.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown client_id", ErrClient)
		}
		return c, err
	}
	if c, ok := s.docs.get(id); ok {
		return c, nil
	}
	doc, err := s.docs.fetch(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: its metadata document: %v", ErrClient, err)
	}
	if err := doc.check(); err != nil {
		return nil, fmt.Errorf("%w: its metadata document: %v", ErrClient, err)
	}
	if err := s.checkRedirects(doc.RedirectURIs); err != nil {
		return nil, fmt.Errorf("%w: its metadata document: %v", ErrClient, err)
	}
	c := &toolplane.OAuthClient{ID: id, Name: doc.ClientName, RedirectURIs: doc.RedirectURIs, Source: toolplane.OAuthClientDocument, CreatedAt: s.cfg.Now()}
	s.docs.put(id, c)
	return c, nil
}

// keepDocument stores a metadata document's client when a person
// consents to it, so an admin lists and revokes it like a registered one
// (later reads refresh the node's cache, not the row). Only a consent
// stores it: an authorization request, which anyone may make before
// signing in, at as many document URLs as they publish, stores nothing,
// so it cannot fill the server's clients. A new document counts toward
// the cap like a registration. A registered client, or a document stored
// already, answers nil.
func (s *Server) keepDocument(ctx context.Context, c *toolplane.OAuthClient) *requestError {
	if c.Source != toolplane.OAuthClientDocument {
		return nil
	}
	err := s.cfg.Store.InsertOAuthClient(ctx, c, s.maxClients())
	switch {
	case errors.Is(err, toolplane.ErrOAuthClientsFull):
		s.log.WarnContext(ctx, "client metadata document not stored: the server holds as many OAuth clients as it may (serve --oauth-max-clients)", "max", s.cfg.MaxClients)
		return &requestError{code: "temporarily_unavailable", redirect: true,
			description: fmt.Sprintf("this server holds as many OAuth clients as its operator allows (%d), and this one is new to it", s.cfg.MaxClients)}
	case err != nil && !errors.Is(err, toolplane.ErrExists):
		s.log.ErrorContext(ctx, "client metadata document not stored", "err", err)
		return &requestError{code: "temporarily_unavailable", description: "try again", redirect: true}
	}
	return nil
}

// maxClients answers the cap the store applies: 0 for none.
func (s *Server) maxClients() int { return max(s.cfg.MaxClients, 0) }

// documentTTL is how long a fetched client metadata document is trusted.
const documentTTL = time.Hour

// documents fetches and remembers client metadata documents.
type documents struct {
	client *http.Client
	max    int64
	now    func() time.Time

	mu sync.Mutex
	m  map[string]cachedClient
}

type cachedClient struct {
	c   *toolplane.OAuthClient
	exp time.Time
}

func newDocuments(c *http.Client, max int64, now func() time.Time) *documents {
	return &documents{client: c, max: max, now: now, m: make(map[string]cachedClient)}
}

func (d *documents) get(id string) (*toolplane.OAuthClient, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[id]
	if !ok || !d.now().Before(e.exp) {
		return nil, false
	}
	return e.c, true
}

func (d *documents) put(id string, c *toolplane.OAuthClient) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.m) >= 1024 {
		clear(d.m)
	}
	d.m[id] = cachedClient{c: c, exp: d.now().Add(documentTTL)}
}

// fetch reads the document at id through the egress rules, bounded in
// time (the client's timeout) and size; its client_id must be id.
func (d *documents) fetch(ctx context.Context, id string) (*registration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, errors.New("it could not be fetched (unreachable, too slow, or an address this server may not reach)")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("it answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, d.max+1))
	if err != nil {
		return nil, errors.New("it could not be read in time")
	}
	if int64(len(body)) > d.max {
		return nil, fmt.Errorf("it is larger than %d bytes", d.max)
	}
	var doc registration
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errors.New("it is not a JSON object")
	}
	if doc.ClientID != id {
		return nil, errors.New("its client_id is not its own URL")
	}
	return &doc, nil
}
