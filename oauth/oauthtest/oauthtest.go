// Package oauthtest runs a real OAuth 2.0 / OpenID Connect provider in
// process for tests: zitadel's OpenID provider (github.com/zitadel/oidc/v3
// op) with its example storage and login page, on a loopback httptest
// server. Tests of the OAuth client, of the connection service and of the
// REST doors drive the same provider: its discovery, its authorization
// code grant with PKCE (through a login made without a browser), refresh,
// revocation and the client credentials grant.
//
//	p := oauthtest.Start(t)
//	id, secret := p.RegisterClient(callbackURL)
//	... build the authorization URL for p.Issuer with id ...
//	redirect, err := p.Login(ctx, authURL) // callbackURL?code=…&state=…
package oauthtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The client of the client credentials grant that the example storage
// holds (its "service user").
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
)

// Provider is a running provider.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:port), the
	// one its discovery document names.
	Issuer string
	// UserID, Username and Password are the person who can log in.
	UserID   string
	Username string
	Password string

	store *store
	users *userStore
	srv   *httptest.Server
}

// Person is one more person who can log in, added with AddPerson.
type Person struct {
	// ID is the person's subject (the ID token's sub).
	ID       string
	Username string
	Password string
}

// AddPerson adds a person who can log in, whose ID tokens carry claims
// besides the standard ones (an organization, roles, groups: whatever
// the test maps), and answers them. It is safe while the provider serves.
func (p *Provider) AddPerson(claims map[string]any) Person {
	id := "user-" + rand.Text()
	pp := Person{ID: id, Username: id + "@toolplane.test", Password: rand.Text()}
	p.users.add(person(pp.ID, pp.Username, pp.Password), claims)
	return pp
}

// SetClaims sets the claims the ID tokens of the person subject carry
// besides the standard ones (the provider's own person included).
func (p *Provider) SetClaims(subject string, claims map[string]any) {
	p.users.mu.Lock()
	defer p.users.mu.Unlock()
	if p.users.claims == nil {
		p.users.claims = map[string]map[string]any{}
	}
	p.users.claims[subject] = claims
}

// person answers the example storage's user.
func person(id, username, password string) *storage.User {
	return &storage.User{
		ID:                id,
		Username:          username,
		Password:          password,
		FirstName:         "Test",
		LastName:          "Person",
		Email:             username,
		EmailVerified:     true,
		PreferredLanguage: language.English,
	}
}

// Start runs a provider until t ends. Its one person has a random
// password; it has no authorization code client until RegisterClient.
func Start(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{
		UserID:   "user-1",
		Username: "person@toolplane.test",
		Password: rand.Text(),
	}
	srv := httptest.NewUnstartedServer(nil)
	p.srv = srv
	p.Issuer = "http://" + srv.Listener.Addr().String()
	users := &userStore{people: map[string]*storage.User{p.UserID: person(p.UserID, p.Username, p.Password)}}
	p.users = users
	p.store = &store{
		// The example storage's client table is consulted under its own
		// lock, which RegisterClient cannot take: the clients live here.
		Storage: storage.NewStorageWithClients(users, map[string]*storage.Client{}),
		clients: map[string]client{},
		users:   users,
	}
	srv.Config.Handler = exampleop.SetupServer(p.Issuer, p.store, nil, false)
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// RegisterClient registers a confidential client of the authorization
// code grant (with refresh tokens, client_secret_basic, and PKCE checked
// whenever a challenge is sent) allowed to redirect to redirectURIs, and
// answers its id and secret. It is safe while the provider serves.
func (p *Provider) RegisterClient(redirectURIs ...string) (id, secret string) {
	id, secret = "client-"+rand.Text(), rand.Text()
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.clients[id] = client{Client: storage.WebClient(id, secret, redirectURIs...), secret: secret}
	return id, secret
}

// HTTPClient answers a client for the provider's server.
func (p *Provider) HTTPClient() *http.Client { return p.srv.Client() }

// Login completes the authorization at authorizeURL as the provider's
// person: it follows the provider to its login page, posts the person's
// credentials, and answers the URL the provider then redirects to (the
// client's redirect URI with code and state, or with an error), without
// requesting it.
func (p *Provider) Login(ctx context.Context, authorizeURL string) (*url.URL, error) {
	return p.LoginAs(ctx, authorizeURL, p.Username, p.Password)
}

var (
	loginAction = regexp.MustCompile(`<form[^>]*action="([^"]*)"`)
	loginID     = regexp.MustCompile(`name="id" value="([^"]*)"`)
)

// LoginAs is Login with the given credentials. Credentials the provider
// refuses answer an error.
func (p *Provider) LoginAs(ctx context.Context, authorizeURL, username, password string) (*url.URL, error) {
	issuer, err := url.Parse(p.Issuer)
	if err != nil {
		return nil, err
	}
	hc := *p.srv.Client()
	// Redirects within the provider are followed; the first one leaving
	// it is the answer.
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != issuer.Host || len(via) >= 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authorizeURL, nil)
	if err != nil {
		return nil, err
	}
	page, out, err := step(&hc, req)
	if err != nil || out != nil {
		return out, err
	}
	action, id := loginAction.FindSubmatch(page.body), loginID.FindSubmatch(page.body)
	if action == nil || id == nil {
		return nil, fmt.Errorf("oauthtest: %s is not the login page (status %d)", page.url, page.status)
	}
	target, err := page.url.Parse(string(action[1]))
	if err != nil {
		return nil, err
	}
	form := url.Values{"id": {string(id[1])}, "username": {username}, "password": {password}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	page, out, err = step(&hc, req)
	if err != nil || out != nil {
		return out, err
	}
	return nil, fmt.Errorf("oauthtest: the provider did not redirect after the login (status %d at %s)", page.status, page.url)
}

// page is a provider's answer that is not a redirect out of it.
type page struct {
	url    *url.URL
	status int
	body   []byte
}

// step sends req through hc: a redirect leaving the provider answers its
// target, anything else the page.
func step(hc *http.Client, req *http.Request) (*page, *url.URL, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc, err := resp.Location()
		if err != nil {
			return nil, nil, fmt.Errorf("oauthtest: redirect without a location: %w", err)
		}
		return nil, loc, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("oauthtest: %s answered status %d: %s", resp.Request.URL, resp.StatusCode, bytesLine(body))
	}
	return &page{url: resp.Request.URL, status: resp.StatusCode, body: body}, nil, nil
}

func bytesLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// client is a registered client with the secret the example's Client
// keeps to itself.
type client struct {
	*storage.Client
	secret string
}

// store is the example storage with the clients registered here, and a
// lock closing a race of the example: it reads its refresh tokens
// without its lock in GetRefreshTokenInfo (the revocation endpoint).
type store struct {
	*storage.Storage

	mu      sync.Mutex
	clients map[string]client

	refresh sync.RWMutex

	users *userStore
}

// GetClientByClientID implements op.Storage over the registered clients.
func (s *store) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	return storage.RedirectGlobsClient(c.Client), nil
}

// AuthorizeClientIDSecret implements op.Storage over the registered
// clients.
func (s *store) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok || c.secret != secret {
		return errors.New("client not found or secret wrong")
	}
	return nil
}

// GetRefreshTokenInfo implements op.Storage.
func (s *store) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	s.refresh.RLock()
	defer s.refresh.RUnlock()
	return s.Storage.GetRefreshTokenInfo(ctx, clientID, token)
}

// CreateAccessAndRefreshTokens implements op.Storage.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	return s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
}

// RevokeToken implements op.Storage.
func (s *store) RevokeToken(ctx context.Context, token, userID, clientID string) *oidc.Error {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	return s.Storage.RevokeToken(ctx, token, userID, clientID)
}

// TerminateSession implements op.Storage.
func (s *store) TerminateSession(ctx context.Context, userID, clientID string) error {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	return s.Storage.TerminateSession(ctx, userID, clientID)
}

// SetUserinfoFromRequest implements op.CanSetUserinfoFromRequest: an ID
// token carries the example's claims and the person's own (AddPerson,
// SetClaims).
func (s *store) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, userinfo, token, scopes); err != nil {
		return err
	}
	s.users.mu.Lock()
	defer s.users.mu.Unlock()
	for k, v := range s.users.claims[token.GetSubject()] {
		userinfo.AppendClaims(k, v)
	}
	return nil
}

// userStore is the example storage's UserStore over the people the test
// made, with the claims their ID tokens carry besides the standard ones.
type userStore struct {
	mu     sync.Mutex
	people map[string]*storage.User
	claims map[string]map[string]any
}

func (u *userStore) add(p *storage.User, claims map[string]any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.people[p.ID] = p
	if u.claims == nil {
		u.claims = map[string]map[string]any{}
	}
	u.claims[p.ID] = claims
}

func (u *userStore) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.people[id]
}

func (u *userStore) GetUserByUsername(name string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range u.people {
		if p.Username == name {
			return p
		}
	}
	return nil
}

func (u *userStore) ExampleClientID() string { return storage.ServiceUserID }
