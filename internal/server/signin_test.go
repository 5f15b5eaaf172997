package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
	"github.com/toolplane/toolplane/signin"
)

// pageBrowser is a person's browser against a served node: it keeps
// cookies and follows redirects within the node, and stops at the first
// one leaving it (to the provider).
type pageBrowser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newPageBrowser(t *testing.T, base string) *pageBrowser {
	jar, _ := cookiejar.New(nil)
	return &pageBrowser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !strings.HasPrefix(req.URL.String(), base) || len(via) > 10 {
				return http.ErrUseLastResponse
			}
			return nil
		}}}
}

// open answers the status, the page, where the browser ended, and where a
// redirect off the node pointed.
func (b *pageBrowser) open(req *http.Request) (status int, body, at, away string) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Request.URL.String(), resp.Header.Get("Location")
}

func (b *pageBrowser) get(u string) (int, string, string, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.open(req)
}

var (
	providerLink = regexp.MustCompile(`href="(/signin/start\?[^"]+)"`)
	formToken    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// TestPeopleSignInAndConnectTheirOwnAccounts runs serve with sign-in
// through the issuer its JWTs come from (the real in-process provider):
// a person opens their authorization link, is sent to sign in, comes
// back to the link and completes the consent; another person, signed in
// with their own key, is refused the same person's link.
func TestPeopleSignInAndConnectTheirOwnAccounts(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	p.SetClaims(p.UserID, map[string]any{"toolplane_roles": []string{toolplane.RoleApprover}})
	// The node's address is chosen first: the provider must know its
	// redirect URIs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	signInID, signInSecret := p.RegisterClient(base + "/signin/callback")
	appID, appSecret := p.RegisterClient(base + connection.CallbackPath)

	dir := t.TempDir()
	logs := &syncbuf.Buffer{}
	s, err := New(context.Background(), Config{Addr: addr, Database: filepath.Join(dir, "toolplane.db"), Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		JWTIssuer: p.Issuer, JWTAudience: "toolplane", JWTJWKSURL: p.Issuer + "/keys",
		SignInClientID: signInID, SignInClientSecret: toolplane.SecretString(signInSecret)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })
	admin := readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]

	// The organization's OAuth application at the same provider.
	status, body := post(t, base, "/v1/connections", admin, fmt.Sprintf(`{"name":"crm-app","provider":"crm","kind":"oauth2_authorization_code",
		"config":{"issuer":%q,"client_id":%q,"request_scopes":["openid"],"egress":{"hosts":["127.0.0.1"],"allow_cidrs":["127.0.0.1/32"]}},
		"secrets":{"client_secret":%q}}`, p.Issuer, appID, appSecret))
	if status != http.StatusCreated {
		t.Fatalf("create the application: %d %s", status, body)
	}
	var created struct{ Connection struct{ ID string } }
	json.Unmarshal([]byte(body), &created)
	// The provider's person holds a key of their own, which asks for
	// their link; kim is another person of the organization.
	personKey := mintPerson(t, s, p.UserID)
	kimKey := mintPerson(t, s, "kim")
	link := func() string {
		t.Helper()
		status, body := post(t, base, "/v1/connections/"+created.Connection.ID+"/authorize", personKey, "")
		var out struct {
			URL string `json:"authorization_url"`
		}
		if json.Unmarshal([]byte(body), &out); status != http.StatusOK || out.URL == "" {
			t.Fatalf("authorize: %d %s", status, body)
		}
		return out.URL
	}

	// kim signs in with her key and opens the person's link: refused, and
	// the link is left for its person.
	kim := newPageBrowser(t, base)
	_, page, _, _ := kim.get(base + "/signin")
	m := formToken.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no key form: %s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/signin/key", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {kimKey}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	if status, page, _, _ := kim.open(req); status != http.StatusOK || !strings.Contains(page, "Sign out") {
		t.Fatalf("kim's sign-in: %d %s", status, page)
	}
	theirs := link()
	if status, page, _, _ := kim.get(theirs); status != http.StatusForbidden || !strings.Contains(page, "for another person") {
		t.Fatalf("kim opening another person's link: %d %s", status, page)
	}

	// The person opens the link: sent to sign in, and through the
	// provider back to the link, and on to the consent.
	b := newPageBrowser(t, base)
	status, page, at, _ := b.get(theirs)
	lm := providerLink.FindStringSubmatch(page)
	if status != http.StatusOK || !strings.HasPrefix(at, base+"/signin?return=") || lm == nil {
		t.Fatalf("the link before sign-in ended at %s (%d): %s", at, status, page)
	}
	_, _, _, toProvider := b.get(base + strings.ReplaceAll(lm[1], "&amp;", "&"))
	back, err := p.Login(t.Context(), toProvider)
	if err != nil {
		t.Fatalf("sign-in at the provider: %v", err)
	}
	// Signed in, the browser is back at the link, which sends it to the
	// provider's consent.
	status, page, at, toConsent := b.get(back.String())
	if status != http.StatusFound || !strings.HasPrefix(at, base+connection.StartPath) || !strings.HasPrefix(toConsent, p.Issuer) {
		t.Fatalf("after sign-in the browser ended at %s (%d to %q): %s", at, status, toConsent, page)
	}
	back, err = p.Login(t.Context(), toConsent)
	if err != nil {
		t.Fatalf("consent at the provider: %v", err)
	}
	if status, page, _, _ := b.get(back.String()); status != http.StatusOK || !strings.Contains(page, "Connected crm for "+p.UserID) {
		t.Fatalf("consent callback: %d %s", status, page)
	}

	// The consent records the signed-in credential that started it.
	var changes struct {
		Items []struct {
			Actor  string
			Detail map[string]any
		}
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/changes?kind=connection.consent", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body = string(raw)
	if json.Unmarshal([]byte(body), &changes); len(changes.Items) != 1 || changes.Items[0].Actor != p.UserID ||
		changes.Items[0].Detail["started_by"] != "oidc:"+p.Issuer+":"+p.UserID {
		t.Errorf("consent changes: %s", body)
	}
	// No session token or client secret in the log.
	for _, secret := range []string{signInSecret, appSecret, personKey, kimKey} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret (%.6s…) is in the log", secret)
		}
	}
}

// mintPerson stores a key of a person of the default organization.
func mintPerson(t *testing.T, s *Server, subject string) string {
	t.Helper()
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: DefaultOrganization, Kind: toolplane.CredentialPerson, Subject: subject,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := s.b.Store.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

// A browser sign-in reads a person's groups where their tokens carry
// them, unless told otherwise: the console routes approvals by the same
// groups as the API.
func TestSignInReadsTheTokensGroupsClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want signin.Claims
	}{
		{"neither names one", Config{}, signin.Claims{}},
		{"the tokens' claim", Config{JWTClaims: jwtauth.Claims{Groups: "teams", Roles: "idp_roles"}}, signin.Claims{Groups: "teams"}},
		{"sign-in's own wins", Config{JWTClaims: jwtauth.Claims{Groups: "teams"}, SignInClaims: signin.Claims{Groups: "squads"}}, signin.Claims{Groups: "squads"}},
	} {
		if got := signInClaims(tc.cfg); got != tc.want {
			t.Errorf("%s: claims %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
