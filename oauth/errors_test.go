package oauth_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
)

// planted are values a request sends that no error may show.
type planted struct {
	secret, code, verifier, refresh, revoke string
}

func plant() planted {
	v := func(kind string) string { return "planted-" + kind + "-" + rand.Text() + "/+=" }
	return planted{v("secret"), v("code"), v("verifier"), v("refresh"), v("revoke")}
}

func (p planted) all() []string { return []string{p.secret, p.code, p.verifier, p.refresh, p.revoke} }

// hostile answers every request with an error echoing everything the
// request carried, in the way mode says.
func hostile(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		var echo []string
		for _, vs := range r.PostForm {
			echo = append(echo, vs...)
		}
		if id, secret, ok := r.BasicAuth(); ok {
			echo = append(echo, id, secret)
		}
		raw := strings.Join(echo, " ") + " " + url.Values(r.PostForm).Encode() + " " + r.Header.Get("Authorization")
		asJSON := func(status int, code string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": raw, "error_uri": "https://x/" + raw})
		}
		switch mode {
		case "grant":
			asJSON(http.StatusBadRequest, "invalid_grant")
		case "client":
			asJSON(http.StatusUnauthorized, "invalid_client")
		case "code echo":
			asJSON(http.StatusBadRequest, echo[len(echo)-1])
		case "unavailable":
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(raw))
		case "error at 200":
			asJSON(http.StatusOK, "server_error")
		case "garbage":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>" + raw))
		case "form":
			w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(url.Values{"error": {"invalid_grant"}, "error_description": {raw}}.Encode()))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// kind names the error type of err.
func kind(err error) string {
	var (
		ge *oauth.GrantError
		pe *oauth.ProviderError
		te *oauth.TransientError
	)
	switch {
	case err == nil:
		return "nil"
	case errors.As(err, &ge):
		return "grant"
	case errors.As(err, &pe):
		return "provider"
	case errors.As(err, &te):
		return "transient"
	}
	return fmt.Sprintf("%T", err)
}

// leaks answers the planted values err shows in any rendering, in clear
// or encoded, along its whole chain.
func leaks(err error, p planted) []string {
	var texts []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		texts = append(texts, e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e))
	}
	var ge *oauth.GrantError
	var pe *oauth.ProviderError
	var te *oauth.TransientError
	if errors.As(err, &ge) {
		texts = append(texts, fmt.Sprintf("%#v", *ge))
	}
	if errors.As(err, &pe) {
		texts = append(texts, fmt.Sprintf("%#v", *pe))
	}
	if errors.As(err, &te) {
		texts = append(texts, fmt.Sprintf("%#v", *te))
	}
	all := strings.Join(texts, "\n")
	var found []string
	for _, v := range p.all() {
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v), strings.TrimSuffix(v, "/+=")} {
			if strings.Contains(all, form) {
				found = append(found, form)
			}
		}
	}
	return found
}

func TestErrorsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		run  func(ctx context.Context, cfg oauth.Config, p planted) error
	}{
		{"exchange", func(ctx context.Context, cfg oauth.Config, p planted) error {
			_, err := oauth.Exchange(ctx, cfg, p.code, p.verifier, "https://toolplane.example.com/cb")
			return err
		}},
		{"refresh", func(ctx context.Context, cfg oauth.Config, p planted) error {
			_, err := oauth.Refresh(ctx, cfg, toolplane.SecretString(p.refresh))
			return err
		}},
		{"client_credentials", func(ctx context.Context, cfg oauth.Config, p planted) error {
			_, err := oauth.ClientCredentials(ctx, cfg, []string{"read"})
			return err
		}},
		{"revoke", func(ctx context.Context, cfg oauth.Config, p planted) error {
			return oauth.Revoke(ctx, cfg, toolplane.SecretString(p.revoke))
		}},
	}
	for _, tc := range []struct {
		mode string
		want string
		// revoke is the revocation's kind where it differs: it reads
		// JSON errors only, and takes any 200 for done.
		revoke string
	}{
		{mode: "grant", want: "grant"},
		{mode: "client", want: "provider"},
		{mode: "code echo", want: "provider"},
		{mode: "unavailable", want: "transient"},
		{mode: "error at 200", want: "transient", revoke: "nil"},
		{mode: "garbage", want: "transient", revoke: "nil"},
		{mode: "form", want: "grant", revoke: "provider"},
	} {
		for _, op := range ops {
			for _, method := range []oauth.AuthMethod{oauth.AuthSecretBasic, oauth.AuthSecretPost} {
				t.Run(tc.mode+"/"+op.name+"/"+string(method), func(t *testing.T) {
					t.Parallel()
					srv := hostile(t, tc.mode)
					p := plant()
					cfg := oauth.Config{
						TokenURL: srv.URL + "/token", RevokeURL: srv.URL + "/revoke",
						ClientID: "client-1", ClientSecret: toolplane.SecretString(p.secret),
						AuthMethod: method, HTTPClient: srv.Client(),
					}
					err := op.run(t.Context(), cfg, p)
					want := tc.want
					if op.name == "revoke" && tc.revoke != "" {
						want = tc.revoke
					}
					if got := kind(err); got != want {
						t.Fatalf("%v: a %s error, want %s", err, got, want)
					}
					if found := leaks(err, p); len(found) > 0 {
						t.Errorf("the error shows %q: %v", found, err)
					}
					var te *oauth.TransientError
					if tc.mode == "unavailable" && errors.As(err, &te) && (te.Status != 503 || te.RetryAfter != 7*time.Second) {
						t.Errorf("status %d, retry after %v; want 503, 7s", te.Status, te.RetryAfter)
					}
				})
			}
		}
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	// A provider that answers nothing until the caller gives up.
	stop := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(stop) })
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	for _, tc := range []struct {
		name     string
		srv      *httptest.Server
		deadline bool
	}{
		{"unreachable", gone, false},
		{"timeout", slow, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := plant()
			cfg := oauth.Config{
				TokenURL: tc.srv.URL + "/token?k=1", RevokeURL: tc.srv.URL + "/revoke",
				ClientID: "client-1", ClientSecret: toolplane.SecretString(p.secret), HTTPClient: &http.Client{},
			}
			for name, run := range map[string]func(context.Context) error{
				"refresh": func(ctx context.Context) error {
					_, err := oauth.Refresh(ctx, cfg, toolplane.SecretString(p.refresh))
					return err
				},
				"revoke": func(ctx context.Context) error { return oauth.Revoke(ctx, cfg, toolplane.SecretString(p.revoke)) },
				"discover": func(ctx context.Context) error {
					_, err := oauth.Discover(ctx, cfg.HTTPClient, tc.srv.URL)
					return err
				},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				err := run(ctx)
				cancel()
				if !oauth.Retryable(err) {
					t.Errorf("%s: %v, want a *TransientError", name, err)
				}
				if tc.deadline && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s: %v, want it to be context.DeadlineExceeded", name, err)
				}
				if found := leaks(err, p); len(found) > 0 {
					t.Errorf("%s: the error shows %q", name, found)
				}
			}
		})
	}
}

// recorder is a provider that answers tokens and records requests.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// answer is the token response's JSON.
	answer map[string]any
}

type recorded struct {
	path       string
	form       url.Values
	user, pass string
	basic      bool
}

func newRecorder(t *testing.T, answer map[string]any) *recorder {
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		u, p, ok := r.BasicAuth()
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.URL.Path, r.PostForm, u, p, ok})
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rec.answer)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(rec.reqs))
	}
	return rec.reqs[0]
}

func TestRequests(t *testing.T) {
	t.Parallel()
	type call func(context.Context, oauth.Config) (*oauth.Token, error)
	calls := map[string]struct {
		run  call
		want url.Values
	}{
		"exchange": {
			func(ctx context.Context, cfg oauth.Config) (*oauth.Token, error) {
				return oauth.Exchange(ctx, cfg, "the-code", "the-verifier", "https://toolplane.example.com/cb")
			},
			url.Values{"grant_type": {"authorization_code"}, "code": {"the-code"}, "code_verifier": {"the-verifier"},
				"redirect_uri": {"https://toolplane.example.com/cb"}, "resource": {"https://mcp.example.com/mcp"}},
		},
		"refresh": {
			func(ctx context.Context, cfg oauth.Config) (*oauth.Token, error) {
				return oauth.Refresh(ctx, cfg, "the-refresh-token")
			},
			url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"the-refresh-token"}, "resource": {"https://mcp.example.com/mcp"}},
		},
		"client_credentials": {
			func(ctx context.Context, cfg oauth.Config) (*oauth.Token, error) {
				return oauth.ClientCredentials(ctx, cfg, nil)
			},
			url.Values{"grant_type": {"client_credentials"}, "scope": {"read write"}, "resource": {"https://mcp.example.com/mcp"}},
		},
		"revoke": {
			func(ctx context.Context, cfg oauth.Config) (*oauth.Token, error) {
				return nil, oauth.Revoke(ctx, cfg, "the-token")
			},
			url.Values{"token": {"the-token"}},
		},
	}
	for name, c := range calls {
		for _, method := range []oauth.AuthMethod{"", oauth.AuthSecretBasic, oauth.AuthSecretPost, oauth.AuthNone} {
			t.Run(name+"/"+string(method), func(t *testing.T) {
				t.Parallel()
				rec := newRecorder(t, map[string]any{"access_token": "new-access", "token_type": "Bearer", "expires_in": 60})
				cfg := oauth.Config{
					TokenURL: rec.srv.URL + "/token", RevokeURL: rec.srv.URL + "/revoke",
					ClientID: "client/1", ClientSecret: "s3cret:+", AuthMethod: method,
					Scopes: []string{"read", "write"}, Resource: "https://mcp.example.com/mcp",
					HTTPClient: rec.srv.Client(),
				}
				tok, err := c.run(t.Context(), cfg)
				if err != nil {
					t.Fatalf("%v", err)
				}
				got := rec.last(t)
				want := url.Values{}
				for k, v := range c.want {
					want[k] = v
				}
				switch method {
				case "", oauth.AuthSecretBasic:
					if !got.basic || got.user != url.QueryEscape("client/1") || got.pass != url.QueryEscape("s3cret:+") {
						t.Errorf("Basic credentials %t %q %q, want the form-encoded id and secret", got.basic, got.user, got.pass)
					}
				case oauth.AuthSecretPost:
					want.Set("client_id", "client/1")
					want.Set("client_secret", "s3cret:+")
				case oauth.AuthNone:
					want.Set("client_id", "client/1")
				}
				if method != "" && method != oauth.AuthSecretBasic && got.basic {
					t.Errorf("Basic credentials sent with %s", method)
				}
				if got.form.Encode() != want.Encode() {
					t.Errorf("form\n %s\nwant\n %s", got.form.Encode(), want.Encode())
				}
				if tok == nil {
					return
				}
				if tok.AccessToken != "new-access" || time.Until(tok.Expiry) <= 0 {
					t.Errorf("token %q expiring %v", tok.AccessToken.Reveal(), tok.Expiry)
				}
				// The answer names no scope and no refresh token.
				switch name {
				case "refresh":
					if tok.Scopes != nil || tok.RefreshToken != "the-refresh-token" {
						t.Errorf("refresh: scopes %v, refresh %q; want unchanged (nil) and the token kept", tok.Scopes, tok.RefreshToken.Reveal())
					}
				default:
					if strings.Join(tok.Scopes, " ") != "read write" || tok.RefreshToken != "" {
						t.Errorf("scopes %v, refresh %q; want those requested and none", tok.Scopes, tok.RefreshToken.Reveal())
					}
				}
			})
		}
	}
}

func TestRefreshRotates(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, map[string]any{"access_token": "a2", "refresh_token": "r2", "scope": "read", "expires_in": 60})
	cfg := oauth.Config{TokenURL: rec.srv.URL, ClientID: "c", HTTPClient: rec.srv.Client()}
	tok, err := oauth.Refresh(t.Context(), cfg, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken != "r2" || strings.Join(tok.Scopes, " ") != "read" {
		t.Errorf("refresh %q, scopes %v; want r2, [read]", tok.RefreshToken.Reveal(), tok.Scopes)
	}
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	full := oauth.Config{TokenURL: "https://a.example.com/token", RevokeURL: "https://a.example.com/revoke", ClientID: "c", HTTPClient: &http.Client{}}
	for _, tc := range []struct {
		name   string
		change func(*oauth.Config)
		want   error
	}{
		{"no token URL", func(c *oauth.Config) { c.TokenURL = "" }, oauth.ErrConfig},
		{"no client id", func(c *oauth.Config) { c.ClientID = "" }, oauth.ErrConfig},
		{"no HTTP client", func(c *oauth.Config) { c.HTTPClient = nil }, oauth.ErrConfig},
		{"unknown method", func(c *oauth.Config) { c.AuthMethod = "private_key_jwt" }, oauth.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := full
			tc.change(&cfg)
			_, err := oauth.Refresh(t.Context(), cfg, "r")
			if !errors.Is(err, tc.want) || !errors.Is(err, toolplane.ErrInvalid) {
				t.Errorf("Refresh = %v, want %v", err, tc.want)
			}
			_, err = oauth.ClientCredentials(t.Context(), cfg, nil)
			if !errors.Is(err, tc.want) {
				t.Errorf("ClientCredentials = %v, want %v", err, tc.want)
			}
		})
	}
	cfg := full
	cfg.RevokeURL = ""
	if err := oauth.Revoke(t.Context(), cfg, "t"); !errors.Is(err, oauth.ErrNoRevocation) {
		t.Errorf("Revoke without an endpoint = %v, want ErrNoRevocation", err)
	}
	if _, err := oauth.Refresh(t.Context(), full, ""); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Refresh without a token = %v, want ErrInvalid", err)
	}
}
